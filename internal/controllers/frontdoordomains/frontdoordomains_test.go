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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

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
	p := New(cs, ref, pols, logr.Discard())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- p.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	expect := func(what string, want map[string]string) {
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
			p := New(cs, ref, pols, logr.Discard())
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
	p := New(cs, ref, pols, logr.Discard())
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
