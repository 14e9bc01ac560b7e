package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// identityWorld is what a shadowIdentity sees: namespaces, the cache's pods and shadow
// Deployments, the policy and the rules.
type identityWorld struct {
	namespaces shadowtest.NamespaceLabels
	objs       []client.Object
	pol        *policy.Policy
	rules      validate.CredentialRules
}

func (w identityWorld) identity() shadows.Identity {
	return shadows.Identity{Namespaces: w.namespaces, Cache: fake.NewClientBuilder().WithObjects(w.objs...).Build(), Policies: shadowtest.FixedPolicy{Policy: w.pol}, Rules: w.rules}
}

// sameNamespacePod is a notebook in namespace user that asks for its shadow beside it, as the
// mutating webhook stored it, and that shadow's Deployment, both as pol renders them.
func sameNamespacePod(t *testing.T, pol *policy.Policy) (*corev1.Pod, *appsv1.Deployment) {
	t.Helper()
	p := shadowtest.Mutated(t, shadowtest.Pod("notebook", map[string]string{validate.AnnotationShadowSameNS: "true"}), pol)
	return p, shadowtest.ShadowOf(t, p, pol).Deployment
}

// The one rule of identity for credential copies: a copy's place is a shadow namespace, marked
// for its pod namespace and named as shadowgate names that pod namespace's shadow namespace,
// or, only where copies into pod namespaces are allowed, a pod namespace where the policy in
// force gives a live pod a shadow beside it that mounts the copy, whose Deployment exists at
// the name derived from the pod. Objects a tenant writes in its own namespace never make one.
func TestWhereACredentialCopyMayBe(t *testing.T) {
	_, _, _, _, pol := handlers(t)
	restricted, errs := validate.PolicyConfigMap(shadowtest.ExamplePolicyConfigMap(t, func(doc string) string {
		return strings.ReplaceAll(doc, "    Network:\n", "    AllowedNamespaces: [lab]\n    Network:\n")
	}), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	notebook, shadow := sameNamespacePod(t, pol)
	key := func(ns string) inject.Credential {
		return inject.Credential{Kind: "Secret", Name: "hpc-ssh-key", Namespace: ns}
	}
	marked := func(podNS string) map[string]string { return map[string]string{inject.LabelShadowNamespaceFor: podNS} }
	// A Deployment of the tenant's, labelled as a shadow and mounting the key.
	planted := mountingDeployment("user", "Secret/hpc-ssh-key")
	planted.Labels = map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelPodUID: "pod-uid"}
	finished := notebook.DeepCopy()
	finished.Status.Phase = corev1.PodSucceeded
	noSameNS := notebook.DeepCopy()
	delete(noSameNS.Annotations, validate.AnnotationShadowSameNS)
	otherUID := shadow.DeepCopy()
	otherUID.Labels[inject.LabelPodUID] = "another-pod"
	offNode := notebook.DeepCopy()
	offNode.Spec.NodeSelector = map[string]string{validate.LabelHostname: "worker-1"}
	podNamespace := shadowtest.NamespaceLabels{"user": nil}
	withoutPodCopies := validate.CredentialRules{WithoutCopiesInPodNamespaces: true}

	for name, c := range map[string]struct {
		world identityWorld
		copy  inject.Credential
		want  bool
	}{
		"a shadow namespace marked for its pod namespace holds copies": {
			identityWorld{namespaces: shadowtest.NamespaceLabels{"user-shadow": marked("user")}, pol: pol, rules: withoutPodCopies}, key("user-shadow"), true},
		"a shadow namespace under a hashed name holds copies": {
			identityWorld{namespaces: shadowtest.NamespaceLabels{inject.ShadowNamespace("a--b", false): marked("a--b")}, pol: pol, rules: withoutPodCopies},
			key(inject.ShadowNamespace("a--b", false)), true},
		"a namespace named as a shadow namespace but unmarked holds none": {
			identityWorld{namespaces: shadowtest.NamespaceLabels{"user-shadow": nil}, pol: pol}, key("user-shadow"), false},
		"a shadow namespace marked for another pod namespace holds none": {
			identityWorld{namespaces: shadowtest.NamespaceLabels{"user-shadow": marked("other")}, pol: pol}, key("user-shadow"), false},
		"a marked namespace that is not where its pod namespace's shadows go holds none": {
			identityWorld{namespaces: shadowtest.NamespaceLabels{"team-secrets": marked("user")}, pol: pol}, key("team-secrets"), false},
		"a namespace that does not exist holds none": {
			identityWorld{namespaces: shadowtest.NamespaceLabels{}, pol: pol}, key("user-shadow"), false},
		"a tenant's namespace holding a Deployment labelled as a shadow and mounting the key holds none": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{planted}, pol: pol, rules: withoutPodCopies}, key("user"), false},
		"so does it where copies into pod namespaces are allowed": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{planted}, pol: pol}, key("user"), false},
		"a pod namespace whose live pod has its shadow beside it holds its copy where copies into pod namespaces are allowed": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{notebook, shadow}, pol: pol}, key("user"), true},
		"it holds none where they are not": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{notebook, shadow}, pol: pol, rules: withoutPodCopies}, key("user"), false},
		"it holds no copy of a credential the shadow does not mount": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{notebook, shadow}, pol: pol},
			inject.Credential{Kind: "Secret", Name: "cern-keytab", Namespace: "user"}, false},
		"it holds none without the shadow's Deployment": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{notebook}, pol: pol}, key("user"), false},
		"it holds none when the Deployment at the shadow's name is another pod's": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{notebook, otherUID}, pol: pol}, key("user"), false},
		"it holds none once the pod has finished": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{finished, shadow}, pol: pol}, key("user"), false},
		"it holds none when the pod asks for no shadow beside it": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{noSameNS, shadow}, pol: pol}, key("user"), false},
		"it holds none when the pod is on no virtual node of the policy": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{offNode, shadow}, pol: pol}, key("user"), false},
		"it holds none when no virtual node allows the pod's namespace": {
			identityWorld{namespaces: podNamespace, objs: []client.Object{notebook, shadow}, pol: restricted}, key("user"), false},
	} {
		t.Run(name, func(t *testing.T) {
			id := c.world.identity()
			got, err := id.MayHoldCopy(context.Background(), c.copy)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("mayHoldCopy(%+v) = %v, want %v", c.copy, got, c.want)
			}
			holds, err := id.HoldsCopies(context.Background(), c.copy.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			if c.want && !holds {
				t.Errorf("holdsCopies(%s) = false where a copy may be", c.copy.Namespace)
			}
		})
	}
}

// The follower never reads nor writes a Secret in a tenant's namespace, however the tenant
// labels a Deployment there and annotates the Secret; the same objects in a shadow namespace
// are followed, the copy overwritten with its source.
func TestTheFollowerLeavesWhatATenantPlantsAlone(t *testing.T) {
	_, _, _, _, pol := handlers(t)
	source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shadowgate-system", Name: "hpc-ssh-key"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"id_ed25519": []byte("the site's key")}}
	for name, c := range map[string]struct {
		namespace  string
		namespaces shadowtest.NamespaceLabels
		followed   bool
	}{
		"in a tenant's namespace the tenant's Secret is neither read nor written": {"tenant", shadowtest.NamespaceLabels{"tenant": nil}, false},
		"in a shadow namespace the copy is overwritten with its source":           {"tenant-shadow", shadowtest.NamespaceLabels{"tenant-shadow": {inject.LabelShadowNamespaceFor: "tenant"}}, true},
	} {
		t.Run(name, func(t *testing.T) {
			d := mountingDeployment(c.namespace, "Secret/hpc-ssh-key")
			d.Labels = map[string]string{inject.LabelManagedBy: inject.ManagedBy}
			planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: "hpc-ssh-key",
				Annotations: map[string]string{validate.AnnotationReplicatedFrom: "shadowgate-system/hpc-ssh-key"}},
				Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"id_ed25519": []byte("the tenant's own")}}
			var touched []string
			api := fake.NewClientBuilder().WithObjects(source, planted).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if key.Namespace != "shadowgate-system" {
						touched = append(touched, "get "+key.String())
					}
					return c.Get(ctx, key, obj, opts...)
				},
			}).Build()
			cache := fake.NewClientBuilder().WithObjects(d).WithIndex(&appsv1.Deployment{}, indexMounts, func(o client.Object) []string {
				return mountedCredentials(&o.(*appsv1.Deployment).Spec.Template.Spec)
			}).Build()
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			f := &CredentialFollower{
				shadows:              cache,
				identity:             shadows.Identity{Namespaces: c.namespaces, Cache: cache, Policies: shadowtest.FixedPolicy{Policy: pol}, Rules: validate.CredentialRules{WithoutCopiesInPodNamespaces: true}},
				sources:              api,
				applier:              applier.New(api, api, nil, "shadowgate-system", m, nil),
				policies:             shadowtest.FixedPolicy{Policy: pol},
				credentialsNamespace: "shadowgate-system",
				recorder:             &shadowtest.RecordingEvents{},
				metrics:              m,
				limiter:              rate.NewLimiter(rate.Inf, 1),
				refusals:             map[copyKey]string{},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[copyKey]())
			defer q.ShutDown()
			f.enqueue(ctx, q, mountedCopies(d, nil, f.replicated(), f.credentialsNamespace))
			if queued := q.Len() == 1; queued != c.followed {
				t.Errorf("the Deployment's copy queued: %v", queued)
			}
			if _, err := f.Reconcile(ctx, copyKey{Namespace: c.namespace, Kind: "Secret", Name: "hpc-ssh-key"}); err != nil {
				t.Fatal(err)
			}
			got := &corev1.Secret{}
			if err := api.Get(ctx, client.ObjectKeyFromObject(planted), got); err != nil {
				t.Fatal(err)
			}
			if followed := string(got.Data["id_ed25519"]) == "the site's key"; followed != c.followed {
				t.Errorf("the Secret holds %q", got.Data["id_ed25519"])
			}
			if !c.followed && len(touched) > 1 { // the last is the test's own read above
				t.Errorf("the follower read %v", touched[:len(touched)-1])
			}
		})
	}
}

// A source Secret of a type no key or keytab is kept in is not copied: the copy is refused,
// naming the Secret, its type and what to do, before anything is read in the shadow's namespace.
func TestASourceOfAnotherTypeIsNotCopied(t *testing.T) {
	for _, typ := range []corev1.SecretType{corev1.SecretTypeServiceAccountToken, corev1.SecretTypeTLS, corev1.SecretTypeDockerConfigJson} {
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shadowgate-system", Name: "hpc-ssh-key"}, Type: typ}
		api := fake.NewClientBuilder().WithObjects(src).Build()
		a := applier.New(api, api, nil, "shadowgate-system", nil, nil)
		action, err := a.CopyCredential(context.Background(), inject.Credential{Kind: "Secret", Name: "hpc-ssh-key", Namespace: "user-shadow"}, false, true)
		want := `secret shadowgate-system/hpc-ssh-key is of type "` + string(typ) + `", and shadowgate copies only Secrets of type Opaque or kubernetes.io/ssh-auth`
		if action != applier.CopyStuck || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "kubectl create secret generic hpc-ssh-key -n shadowgate-system") {
			t.Errorf("%s: %v, %v; want CopyStuck and a Forbidden saying %q and the remedy", typ, action, err, want)
		}
		if err := api.Get(context.Background(), client.ObjectKey{Namespace: "user-shadow", Name: "hpc-ssh-key"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a copy was written: %v", typ, err)
		}
	}
	for _, typ := range applier.CopyableSecretTypes {
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shadowgate-system", Name: "hpc-ssh-key"}, Type: typ}
		api := fake.NewClientBuilder().WithObjects(src).Build()
		a := applier.New(api, api, nil, "shadowgate-system", nil, nil)
		if action, err := a.CopyCredential(context.Background(), inject.Credential{Kind: "Secret", Name: "hpc-ssh-key", Namespace: "user-shadow"}, false, true); err != nil || action != applier.CopyCreate {
			t.Errorf("%s: %v, %v; want it copied", typ, action, err)
		}
	}
}

// The one rule of identity for a pod's shadow objects: those at the names shadowgate derives for
// the pod, in the shadow namespace marked for the pod's namespace, or in the pod's own
// namespace at the names of a shadow beside its pod. A look-alike that claims the pod by
// interlink.eu/shadow-for and its UID anywhere else is no object of its shadow.
func TestAPodsShadowObjectsAreAtTheNamesShadowgateDerives(t *testing.T) {
	const podNS, pod, uid = "user", "notebook", "victim-uid"
	shadow, beside := inject.ShadowName(pod, podNS, false), inject.ShadowName(pod, podNS, true)
	shadowNS := inject.ShadowNamespace(podNS, false)
	claim := func(kind client.Object, ns, name string) client.Object {
		kind.SetNamespace(ns)
		kind.SetName(name)
		kind.SetLabels(map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelPodUID: uid})
		kind.SetAnnotations(map[string]string{inject.AnnotationShadowFor: podNS + "/" + pod})
		return kind
	}
	marked := shadowtest.NamespaceLabels{shadowNS: {inject.LabelShadowNamespaceFor: podNS}, "evil": {}, podNS: {}}
	for name, c := range map[string]struct {
		obj        client.Object
		namespaces shadowtest.NamespaceLabels
		want       bool
	}{
		"The shadow Deployment in the marked shadow namespace is the pod's.": {
			obj: claim(&appsv1.Deployment{}, shadowNS, shadow), namespaces: marked, want: true},
		"The node ConfigMap in the marked shadow namespace is the pod's.": {
			obj: claim(&corev1.ConfigMap{}, shadowNS, inject.NodeConfigMapName(shadow)), namespaces: marked, want: true},
		"A shadow beside its pod is the pod's, at the same-namespace name.": {
			obj: claim(&corev1.Service{}, podNS, beside), namespaces: marked, want: true},
		"A look-alike in the attacker's own namespace, at the shadow's name, is not.": {
			obj: claim(&appsv1.Deployment{}, "evil", shadow), namespaces: marked},
		"A look-alike in the pod's namespace at the shadow namespace's name is not.": {
			obj: claim(&appsv1.Deployment{}, podNS, shadow), namespaces: marked},
		"A look-alike in the shadow namespace at another name is not.": {
			obj: claim(&corev1.ConfigMap{}, shadowNS, "planted-node"), namespaces: marked},
		"The shadow namespace's name, not marked for the pod's namespace, holds none of its shadow.": {
			obj: claim(&appsv1.Deployment{}, shadowNS, shadow), namespaces: shadowtest.NamespaceLabels{shadowNS: {inject.LabelShadowNamespaceFor: "evil"}}},
		"A shadow namespace that does not exist holds none of its shadow.": {
			obj: claim(&appsv1.Deployment{}, shadowNS, shadow), namespaces: shadowtest.NamespaceLabels{}},
	} {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithObjects(c.obj)
			for _, kind := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}, &networkingv1.NetworkPolicy{}} {
				b = b.WithIndex(kind, shadows.IndexShadowFor, shadows.ShadowForIndex)
			}
			objs, err := shadows.Identity{Namespaces: c.namespaces, Cache: b.Build()}.Objects(t.Context(), podNS+"/"+pod)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(objs) == 1; got != c.want {
				t.Errorf("%s/%s taken for the pod's shadow: %v, want %v", c.obj.GetNamespace(), c.obj.GetName(), got, c.want)
			}
		})
	}
}
