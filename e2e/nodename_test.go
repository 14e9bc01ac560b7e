package e2e

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/inject"
)

// A pod created with spec.nodeName skips the scheduler and the virtual node's taint, so it
// needs neither a toleration nor an interLink annotation to land on the virtual node. The pod
// webhooks' condition sends it all the same: bound to hpc-vk with a port, it gets its shadow;
// bound to an ordinary node, it is admitted as it is, with none.
func TestAPodBoundByNodeNameIsJudgedAsItsNodeSays(t *testing.T) {
	createNamespaces(t, "bound")
	bound := func(name, node string) string {
		pod := corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bound"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "busybox",
				Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}}},
		}
		b, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, c := range map[string]struct {
		node   string
		shadow bool
	}{
		"on-vk":     {"hpc-vk", true},
		"on-worker": {"worker-1", false},
	} {
		mustKubectl(t, bound(name, c.node), "apply", "-f", "-")
		shadow := name + "-bound" // the virtual kubelet's name, <pod>-<ns> in <ns>-shadow
		for _, obj := range [][]string{
			{"deployment", shadow, "-n", "bound-shadow"},
			{"service", shadow, "-n", "bound-shadow"},
			{"configmap", inject.NodeConfigMapName(shadow), "-n", "bound-shadow"},
		} {
			if ok, out := exists(t, obj...); ok != c.shadow {
				t.Errorf("pod %s on %s: %s %s exists: %v, want %v (%s)", name, c.node, obj[0], obj[1], ok, c.shadow, out)
			}
		}
	}
}
