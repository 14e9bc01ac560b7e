package follower

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// The follower checks exactly the copies admission made: what a rendered shadow Deployment
// mounts of the policy's replicated credentials is what its shadow copies.
func TestTheFollowerChecksTheCopiesAShadowMounts(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
	for _, node := range []string{"hpc-vk", "cern-vk"} {
		p := shadowtest.Mutated(t, offloadedOn(node), pol)
		shadow := shadowtest.ShadowOf(t, p, pol)
		var want []copyKey
		for _, c := range shadow.Credentials() {
			want = append(want, copyKey{Namespace: c.Namespace, Kind: c.Kind, Name: c.Name})
		}
		if len(want) == 0 {
			t.Fatalf("%s: the example policy copies no credential", node)
		}
		got := mountedCopies(shadow.Deployment, nil, replicatedSources(pol), "shadowgate-system")
		slices.SortFunc(got, compareKeys)
		slices.SortFunc(want, compareKeys)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the follower would check %v, the shadow copies %v", node, got, want)
		}
	}
}

// Without replication the follower has nothing of a node's to check: the site provides the
// objects of those names itself, and they are not shadowgate's.
func TestTheFollowerLeavesCredentialsThePolicyDoesNotReplicate(t *testing.T) {
	pol, errs := validate.PolicyConfigMap(shadowtest.ExamplePolicyConfigMap(t, shadowtest.ReplicationOff), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := replicatedSources(pol); len(got) != 0 {
		t.Errorf("with ReplicateCredentials: false everywhere the follower checks %v", got)
	}
	d := shadowtest.MountingDeployment("user-shadow", "Secret/hpc-ssh-key")
	if got := mountedCopies(d, nil, replicatedSources(pol), "shadowgate-system"); len(got) != 0 {
		t.Errorf("a Deployment mounting a credential the policy does not replicate queues %v", got)
	}
}

func TestWhichCopiesASourceChangeQueues(t *testing.T) {
	const src = "Secret/hpc-ssh-key"
	deployments := []client.Object{
		shadowtest.MountingDeployment("a-shadow", src, "ConfigMap/hpc-known-hosts"),
		shadowtest.MountingDeployment("a-shadow", src), // a second shadow of the namespace shares the copy
		shadowtest.MountingDeployment("b-shadow", src),
		shadowtest.MountingDeployment("c-shadow", "ConfigMap/hpc-known-hosts"), // mounts another source
		shadowtest.MountingDeployment("shadowgate-system", src),                // mounts the source itself
	}
	got := copiesOf(deployments, src, "shadowgate-system")
	want := []copyKey{{"a-shadow", "Secret", "hpc-ssh-key"}, {"b-shadow", "Secret", "hpc-ssh-key"}}
	if !slices.Equal(got, want) {
		t.Errorf("a change of %s queues %v, want %v", src, got, want)
	}
}

// A Deployment's update queues only what its template mounts anew: its status changes all the
// time and must cost nothing.
func TestADeploymentUpdateQueuesOnlyNewMounts(t *testing.T) {
	replicated := map[string]bool{"Secret/hpc-ssh-key": true, "ConfigMap/hpc-known-hosts": true}
	old := shadowtest.MountingDeployment("a-shadow", "Secret/hpc-ssh-key")
	same := old.DeepCopy()
	same.Status.ReadyReplicas = 1
	if got := mountedCopies(same, old, replicated, "shadowgate-system"); len(got) != 0 {
		t.Errorf("a status update queues %v", got)
	}
	more := shadowtest.MountingDeployment("a-shadow", "Secret/hpc-ssh-key", "ConfigMap/hpc-known-hosts")
	want := []copyKey{{"a-shadow", "ConfigMap", "hpc-known-hosts"}}
	if got := mountedCopies(more, old, replicated, "shadowgate-system"); !slices.Equal(got, want) {
		t.Errorf("a template mounting one more credential queues %v, want %v", got, want)
	}
}

func offloadedOn(node string) *corev1.Pod {
	p := shadowtest.Pod("trainer", nil)
	p.Spec.NodeName = node
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8888}}
	return p
}

func compareKeys(a, b copyKey) int { return strings.Compare(a.String(), b.String()) }

// The follower never reads nor writes a Secret in a tenant's namespace, however the tenant
// labels a Deployment there and annotates the Secret; the same objects in a shadow namespace
// are followed, the copy overwritten with its source.
func TestTheFollowerLeavesWhatATenantPlantsAlone(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
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
			d := shadowtest.MountingDeployment(c.namespace, "Secret/hpc-ssh-key")
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
			cache := fake.NewClientBuilder().WithObjects(d).WithIndex(&appsv1.Deployment{}, indexMounts, shadows.UsedCredentials).
				WithIndex(&networkingv1.Ingress{}, indexMounts, shadows.UsedCredentials).Build()
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

// The front door's wildcard certificate follows its source like a mounted credential: a
// shadow Ingress naming it queues its copy, and a renewal of the source queues the copy of
// every namespace whose Ingress names it.
func TestAnIngressTLSSecretIsFollowedLikeAMount(t *testing.T) {
	const tls = "Secret/apps-wildcard-tls"
	replicated := map[string]bool{tls: true}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "a-shadow", Name: "notebook-user"},
		Spec: networkingv1.IngressSpec{TLS: []networkingv1.IngressTLS{{SecretName: "apps-wildcard-tls"}}}}
	want := []copyKey{{"a-shadow", "Secret", "apps-wildcard-tls"}}
	if got := mountedCopies(ing, nil, replicated, "shadowgate-system"); !slices.Equal(got, want) {
		t.Errorf("a new shadow Ingress queues %v, want %v", got, want)
	}
	if got := mountedCopies(ing, ing.DeepCopy(), replicated, "shadowgate-system"); len(got) != 0 {
		t.Errorf("an Ingress update naming nothing new queues %v", got)
	}
	other := ing.DeepCopy()
	other.Namespace = "b-shadow"
	users := []client.Object{ing, other, shadowtest.MountingDeployment("c-shadow", "Secret/hpc-ssh-key")}
	want = []copyKey{{"a-shadow", "Secret", "apps-wildcard-tls"}, {"b-shadow", "Secret", "apps-wildcard-tls"}}
	if got := copiesOf(users, tls, "shadowgate-system"); !slices.Equal(got, want) {
		t.Errorf("a renewed certificate queues %v, want %v", got, want)
	}
}
