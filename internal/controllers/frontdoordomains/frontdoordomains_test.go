package frontdoordomains

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// frontDoorNode is an SSH node with a front door under wildcard.
func frontDoorNode(wildcard string) policy.VirtualNode {
	n := policy.Defaults()
	n.Network.EnableTunnel, n.Network.ShadowMode, n.Network.WildcardDNS = true, policy.ShadowModeSSH, wildcard
	return n
}

func TestDomainsAreThoseOfTheNodesWithAFrontDoor(t *testing.T) {
	noTunnel := frontDoorNode("apps.example.org")
	noTunnel.Network.EnableTunnel = false
	for name, c := range map[string]struct {
		nodes map[string]policy.VirtualNode
		want  map[string]string
	}{
		"A policy without a front door reserves no domain.": {
			nodes: map[string]policy.VirtualNode{"hpc-vk": policy.Defaults()}, want: map[string]string{},
		},
		"A wildcard is reserved as its domain.": {
			nodes: map[string]policy.VirtualNode{"hpc-vk": frontDoorNode("*.apps.example.org")},
			want:  map[string]string{"apps.example.org": "hpc-vk"},
		},
		"Nodes sharing a domain are listed together, sorted.": {
			nodes: map[string]policy.VirtualNode{"b-vk": frontDoorNode("apps.example.org"), "a-vk": frontDoorNode("*.apps.example.org"),
				"c-vk": frontDoorNode("lab.example.org")},
			want: map[string]string{"apps.example.org": "a-vk,b-vk", "lab.example.org": "c-vk"},
		},
		"A node whose WildcardDNS opens no front door reserves nothing.": {
			nodes: map[string]policy.VirtualNode{"hpc-vk": noTunnel}, want: map[string]string{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Domains(&policy.Policy{VirtualNodes: c.nodes}); !maps.Equal(got, c.want) {
				t.Errorf("Domains = %v, want %v", got, c.want)
			}
		})
	}
}

// liveOf is a cache holding objs, in which user-shadow is the shadow namespace of user.
func liveOf(objs []client.Object, gatewayAPI bool) Live {
	return Live{
		Cache:      shadowtest.Client(objs...).Build(),
		Informers:  &informertest.FakeInformers{Scheme: clientgoscheme.Scheme},
		GatewayAPI: gatewayAPI,
		Namespaces: shadows.Identity{Namespaces: shadowtest.NamespaceLabels{
			"user": nil, "user-shadow": {inject.LabelShadowNamespaceFor: "user"}, "other-shadow": nil,
		}},
	}
}

// ingress is shadowgate's Ingress in namespace ns with a rule for each of ruleHosts and a TLS
// entry for tlsHosts.
func ingress(ns, name string, ruleHosts, tlsHosts []string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{inject.LabelManagedBy: inject.ManagedBy}}}
	for _, h := range ruleHosts {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: h})
	}
	if len(tlsHosts) > 0 {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: tlsHosts}}
	}
	return ing
}

func TestTheDomainsOfLiveShadowsStayReserved(t *testing.T) {
	lab := &policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": frontDoorNode("*.lab.example.org")}}
	off := &policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": policy.Defaults()}}
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "user-shadow", Name: "shadow-nb-8888",
		Labels: map[string]string{inject.LabelManagedBy: inject.ManagedBy}},
		Spec: gatewayv1.HTTPRouteSpec{Hostnames: []gatewayv1.Hostname{"nb-user-8888-abc.apps.example.org"}}}
	for name, c := range map[string]struct {
		pol        *policy.Policy
		objs       []client.Object
		gatewayAPI bool
		want       map[string]string
	}{
		"A domain an Ingress in a shadow namespace still serves stays reserved while its shadow rolls.": {
			pol: lab, objs: []client.Object{ingress("user-shadow", "shadow-nb", []string{"nb-user-8888-abc.apps.example.org"}, nil)},
			want: map[string]string{"lab.example.org": "hpc-vk", "apps.example.org": Rolling},
		},
		"So does one after the front door is turned off.": {
			pol: off, objs: []client.Object{ingress("user-shadow", "shadow-nb", []string{"nb-user-8888-abc.apps.example.org"}, nil)},
			want: map[string]string{"apps.example.org": Rolling},
		},
		"An Ingress's TLS hosts count as its rules' do.": {
			pol: off, objs: []client.Object{ingress("user-shadow", "shadow-nb", nil, []string{"nb-user-8888-abc.apps.example.org"})},
			want: map[string]string{"apps.example.org": Rolling},
		},
		"A domain the policy names keeps its nodes however many shadows serve under it.": {
			pol: lab, objs: []client.Object{ingress("user-shadow", "shadow-nb", []string{"nb-user-8888-abc.lab.example.org"}, nil)},
			want: map[string]string{"lab.example.org": "hpc-vk"},
		},
		"An HTTPRoute's hostnames count where the API server serves HTTPRoutes.": {
			pol: off, objs: []client.Object{route}, gatewayAPI: true,
			want: map[string]string{"apps.example.org": Rolling},
		},
		"An Ingress in a pod namespace, its tenant's to edit, reserves nothing.": {
			pol: lab, objs: []client.Object{ingress("user", "shadow-nb", []string{"nb-user-8888-abc.apps.example.org"}, nil)},
			want: map[string]string{"lab.example.org": "hpc-vk"},
		},
		"An Ingress in a namespace named as a shadow namespace but unmarked reserves nothing.": {
			pol: lab, objs: []client.Object{ingress("other-shadow", "shadow-nb", []string{"nb-user-8888-abc.apps.example.org"}, nil)},
			want: map[string]string{"lab.example.org": "hpc-vk"},
		},
		"An Ingress in a namespace that does not exist reserves nothing.": {
			pol: lab, objs: []client.Object{ingress("gone-shadow", "shadow-nb", []string{"nb-user-8888-abc.apps.example.org"}, nil)},
			want: map[string]string{"lab.example.org": "hpc-vk"},
		},
		"A host whose domain no WildcardDNS could name reserves nothing.": {
			pol: off, objs: []client.Object{ingress("user-shadow", "shadow-nb", []string{"nb.org", "nb.10.0.0.1", "", "*"}, nil)},
			want: map[string]string{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := New(fake.NewClientset(), types.NamespacedName{Namespace: "shadowgate-system", Name: DefaultName},
				&policies{pol: c.pol}, liveOf(c.objs, c.gatewayAPI), logr.Discard())
			got, err := p.reserved(t.Context(), c.pol)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("reserved = %v, want %v", got, c.want)
			}
		})
	}
}

// A domain the policy no longer names is released once the last Ingress under it goes, which
// the Publisher hears of from the cache's informer.
func TestADomainIsReleasedWhenItsLastShadowObjectGoes(t *testing.T) {
	ref := types.NamespacedName{Namespace: "shadowgate-system", Name: DefaultName}
	cs := fake.NewClientset()
	ing := ingress("user-shadow", "shadow-nb", []string{"nb-user-8888-abc.apps.example.org"}, nil)
	live := liveOf([]client.Object{ing}, false)
	pols := &policies{pol: &policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": frontDoorNode("*.apps.example.org")}}}
	p := New(cs, ref, pols, live, logr.Discard())
	start(t, p)
	expect := configMapSays(t, cs, ref)
	expect("at start", map[string]string{"apps.example.org": "hpc-vk"})

	pols.set(&policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": frontDoorNode("lab.example.org")}})
	expect("while the shadow still serves under the old domain", map[string]string{"lab.example.org": "hpc-vk", "apps.example.org": Rolling})

	if err := live.Cache.(client.Client).Delete(t.Context(), ing); err != nil {
		t.Fatal(err)
	}
	informer, err := live.Informers.(*informertest.FakeInformers).FakeInformerFor(t.Context(), &networkingv1.Ingress{})
	if err != nil {
		t.Fatal(err)
	}
	informer.Delete(ing)
	expect("once the shadow's Ingress is gone", map[string]string{"lab.example.org": "hpc-vk"})
}

// configMapSays waits until the ConfigMap ref holds want.
func configMapSays(t *testing.T, cs *fake.Clientset, ref types.NamespacedName) func(what string, want map[string]string) {
	return func(what string, want map[string]string) {
		t.Helper()
		var got map[string]string
		err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cm, err := cs.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got = cm.Data
			return maps.Equal(got, want), nil
		})
		if err != nil {
			t.Fatalf("%s: the ConfigMap holds %v, want %v", what, got, want)
		}
	}
}

// policies is a policy store whose policy the test sets.
type policies struct {
	mu       sync.Mutex
	pol      *policy.Policy
	onChange []func()
}

func (p *policies) Current() *policy.Policy { p.mu.Lock(); defer p.mu.Unlock(); return p.pol }
func (p *policies) OnChange(f func())       { p.onChange = append(p.onChange, f) }
func (p *policies) set(pol *policy.Policy) {
	p.mu.Lock()
	p.pol = pol
	p.mu.Unlock()
	for _, f := range p.onChange {
		f()
	}
}

// The ConfigMap follows the policy in force, and comes back when deleted or edited.
func TestTheConfigMapFollowsThePolicyAndIsRestored(t *testing.T) {
	ref := types.NamespacedName{Namespace: "shadowgate-system", Name: DefaultName}
	cs := fake.NewClientset()
	pols := &policies{pol: &policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": frontDoorNode("*.apps.example.org")}}}
	p := New(cs, ref, pols, liveOf(nil, false), logr.Discard())
	start(t, p)
	expect := configMapSays(t, cs, ref)
	expect("at start", map[string]string{"apps.example.org": "hpc-vk"})

	pols.set(&policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": frontDoorNode("lab.example.org")}})
	expect("after a policy change", map[string]string{"lab.example.org": "hpc-vk"})

	if err := cs.CoreV1().ConfigMaps(ref.Namespace).Delete(t.Context(), ref.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("after a delete", map[string]string{"lab.example.org": "hpc-vk"})

	cm, err := cs.CoreV1().ConfigMaps(ref.Namespace).Get(t.Context(), ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{}
	if _, err := cs.CoreV1().ConfigMaps(ref.Namespace).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("after an edit", map[string]string{"lab.example.org": "hpc-vk"})

	pols.set(&policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": policy.Defaults()}})
	expect("after the front door is turned off", map[string]string{})

}

// A ConfigMap that already says what the policy says is not written again; one that differs
// is patched to exactly the policy's domains, at the version read.
func TestAConfigMapThatSaysThePolicyIsNotWritten(t *testing.T) {
	ref := types.NamespacedName{Namespace: "shadowgate-system", Name: DefaultName}
	pols := &policies{pol: &policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": frontDoorNode("*.apps.example.org")}}}
	want := map[string]string{"apps.example.org": "hpc-vk"}
	for name, c := range map[string]struct {
		data   map[string]string
		writes int
	}{
		"The same domains are not written.":    {data: map[string]string{"apps.example.org": "hpc-vk"}, writes: 0},
		"Another node list is written.":        {data: map[string]string{"apps.example.org": "other-vk"}, writes: 1},
		"A domain more is written over.":       {data: map[string]string{"apps.example.org": "hpc-vk", "x.example.org": "a"}, writes: 1},
		"No data at all is written.":           {data: map[string]string{}, writes: 1},
		"No ConfigMap at all is written anew.": {data: nil, writes: 1},
	} {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset()
			var current *corev1.ConfigMap
			if c.data != nil {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace, ResourceVersion: "42"}, Data: c.data}
				cs = fake.NewClientset(cm)
				current = cm
			}
			p := New(cs, ref, pols, liveOf(nil, false), logr.Discard())
			if err := p.publish(t.Context(), current); err != nil {
				t.Fatal(err)
			}
			if got := len(cs.Actions()); got != c.writes {
				t.Fatalf("%d requests, want %d: %v", got, c.writes, cs.Actions())
			}
			if c.writes == 0 {
				return
			}
			if patch, ok := cs.Actions()[0].(k8stesting.PatchAction); ok {
				var p struct {
					Metadata struct {
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(patch.GetPatch(), &p); err != nil {
					t.Fatal(err)
				}
				if p.Metadata.ResourceVersion != current.ResourceVersion {
					t.Errorf("the patch %s is not bound to resourceVersion %s", patch.GetPatch(), current.ResourceVersion)
				}
			}
			cm, err := cs.CoreV1().ConfigMaps(ref.Namespace).Get(t.Context(), ref.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(cm.Data, want) {
				t.Errorf("the ConfigMap holds %v, want %v", cm.Data, want)
			}
		})
	}
}

// A domain another field manager added (an admin's kubectl edit) is removed: the ConfigMap
// says exactly the policy's domains whoever wrote the others.
func TestADomainAddedByAnotherManagerIsRemoved(t *testing.T) {
	ref := types.NamespacedName{Namespace: "shadowgate-system", Name: DefaultName}
	cs := fake.NewClientset()
	pols := &policies{pol: &policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": frontDoorNode("*.apps.example.org")}}}
	p := New(cs, ref, pols, liveOf(nil, false), logr.Discard())
	if err := p.publish(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ref.Namespace).Get(t.Context(), ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["org"] = "edited"
	if _, err := cs.CoreV1().ConfigMaps(ref.Namespace).Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	current, err := cs.CoreV1().ConfigMaps(ref.Namespace).Get(t.Context(), ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.publish(t.Context(), current); err != nil {
		t.Fatal(err)
	}
	after, err := cs.CoreV1().ConfigMaps(ref.Namespace).Get(t.Context(), ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"apps.example.org": "hpc-vk"}; !maps.Equal(after.Data, want) {
		t.Errorf("after the publisher's write the ConfigMap holds %v, want %v", after.Data, want)
	}
}

// start runs p until the test ends, and fails the test if it ends with an error.
func start(t *testing.T, p *Publisher) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- p.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}
