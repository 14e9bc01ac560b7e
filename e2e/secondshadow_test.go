package e2e

import (
	"strings"
	"testing"
	"time"
)

// The virtual kubelet with EnableTunnel and ShadowMode: ssh renders its own shadow under the
// same name and, finding shadowgate's, updates it into its own: its labels, without
// shadowgate's. Done here with kubectl as the VK's Update would leave the object: shadowgate
// applies its shadow again and says on the pod, in a Warning Event, that a second shadow
// exists and which VK setting to change.
func TestASecondShadowOfThePodIsNamedOnThePod(t *testing.T) {
	createNamespaces(t, "second")
	p := offloaded{name: "notebook", namespace: "second", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, p.json(), "apply", "-f", "-")
	mustKubectl(t, "", "label", "deployment", p.shadowName(), "-n", p.shadowNamespace(),
		"app.kubernetes.io/managed-by-", "app.kubernetes.io/component="+p.shadowName(), "--overwrite")
	mustKubectl(t, "", "annotate", "deployment", p.shadowName(), "-n", p.shadowNamespace(), "interlink.eu/shadow-for-")
	eventually(t, 30*time.Second, "a Warning Event SecondShadow on the pod", func() (bool, string) {
		out := mustKubectl(t, "", "get", "events", "-n", p.namespace, "--field-selector",
			"involvedObject.kind=Pod,involvedObject.name="+p.name+",reason=SecondShadow,type=Warning", "-o", "custom-columns=NOTE:.message", "--no-headers")
		return strings.Contains(out, "EnableTunnel: false") && strings.Contains(out, p.shadowNamespace()+"/"+p.shadowName()), out
	})
	eventually(t, 30*time.Second, "shadowgate's shadow Deployment applied again", func() (bool, string) {
		out := mustKubectl(t, "", "get", "deployment", p.shadowName(), "-n", p.shadowNamespace(),
			"-o", "jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by}")
		return out == "shadowgate", out
	})
}
