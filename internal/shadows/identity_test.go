package shadows

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// identityWorld is what an Identity sees: namespaces, the cache's pods and shadow
// Deployments, the policy and the rules.
type identityWorld struct {
	namespaces shadowtest.NamespaceLabels
	objs       []client.Object
	pol        *policy.Policy
	rules      validate.CredentialRules
}

func (w identityWorld) identity() Identity {
	return Identity{Namespaces: w.namespaces, Cache: fake.NewClientBuilder().WithObjects(w.objs...).Build(), Policies: shadowtest.FixedPolicy{Policy: w.pol}, Rules: w.rules}
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
	pol := shadowtest.ExamplePolicy(t)
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
	planted := shadowtest.MountingDeployment("user", "Secret/hpc-ssh-key")
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
		"The front door's Ingress in the marked shadow namespace is the pod's.": {
			obj: claim(&networkingv1.Ingress{}, shadowNS, shadow), namespaces: marked, want: true},
		"An HTTPRoute of the front door, at a port's route name, is the pod's.": {
			obj: claim(&gatewayv1.HTTPRoute{}, shadowNS, inject.RouteName(shadow, 8888)), namespaces: marked, want: true},
		"An HTTPRoute beside its pod, at a port's route name, is the pod's.": {
			obj: claim(&gatewayv1.HTTPRoute{}, podNS, inject.RouteName(beside, 8888)), namespaces: marked, want: true},
		"An HTTPRoute at the shadow's own name, which no route has, is not.": {
			obj: claim(&gatewayv1.HTTPRoute{}, shadowNS, shadow), namespaces: marked},
		"An HTTPRoute look-alike in the attacker's namespace, at a route name, is not.": {
			obj: claim(&gatewayv1.HTTPRoute{}, "evil", inject.RouteName(shadow, 8888)), namespaces: marked},
		"An Ingress look-alike in the attacker's namespace, at the shadow's name, is not.": {
			obj: claim(&networkingv1.Ingress{}, "evil", shadow), namespaces: marked},
		"A shadow namespace that does not exist holds none of its shadow.": {
			obj: claim(&appsv1.Deployment{}, shadowNS, shadow), namespaces: shadowtest.NamespaceLabels{}},
	} {
		t.Run(name, func(t *testing.T) {
			b := shadowtest.Client().WithObjects(c.obj)
			for _, kind := range Objects(true) {
				b = b.WithIndex(kind, IndexShadowFor, ShadowForIndex)
			}
			objs, err := Identity{Namespaces: c.namespaces, Cache: b.Build(), GatewayAPI: true}.Objects(t.Context(), podNS+"/"+pod)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(objs) == 1; got != c.want {
				t.Errorf("%s/%s taken for the pod's shadow: %v, want %v", c.obj.GetNamespace(), c.obj.GetName(), got, c.want)
			}
		})
	}
}
