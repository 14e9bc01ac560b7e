package frontdoordomains

import (
	"maps"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Review draft: a domain another field manager added (an admin's kubectl edit, or a stolen
// token's update, which the least-privilege exception admits) is not removed by the
// publisher's forced apply, whose applied configuration simply does not name it: server-side
// apply removes only fields the applier owned. The package doc says an edit is undone.
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
	t.Logf("managed fields before: %d entries", len(current.ManagedFields))
	if err := p.publish(t.Context(), current); err != nil {
		t.Fatal(err)
	}
	after, err := cs.CoreV1().ConfigMaps(ref.Namespace).Get(t.Context(), ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"apps.example.org": "hpc-vk"}; !maps.Equal(after.Data, want) {
		t.Errorf("after the publisher's apply the ConfigMap holds %v, want %v", after.Data, want)
	}
	var _ *corev1.ConfigMap
}
