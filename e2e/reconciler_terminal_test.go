package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// A pod that finishes (a completed Job's pod: phase Succeeded, or Failed) is kept, but its
// shadow is deleted at once, as for a deleted pod, and not applied again: the job has left the
// compute node, and the shadow would hold SSH sessions to the login node for nothing. There is
// no kubelet here, so the test sets the phase through the status subresource, as one would.
func TestReconcilerDeletesTheShadowOfAFinishedPod(t *testing.T) {
	for _, phase := range []string{"Succeeded", "Failed"} {
		t.Run(phase, func(t *testing.T) {
			ns := "finished-" + strings.ToLower(phase)
			createNamespaces(t, ns)
			p := offloaded{name: "trainer", namespace: ns, node: "hpc-vk", ports: []int32{8888}}
			mustKubectl(t, p.json(), "apply", "-f", "-")
			shadow := [][]string{
				{"deployment", p.shadowName()},
				{"service", p.shadowName()},
				{"configmap", p.shadowName() + "-node"},
			}
			for _, o := range shadow {
				if ok, out := exists(t, o[0], o[1], "-n", p.shadowNamespace()); !ok {
					t.Fatalf("no shadow %s: %s", o[0], out)
				}
			}
			left := func() (bool, string) {
				var present []string
				for _, o := range shadow {
					if ok, _ := exists(t, o[0], o[1], "-n", p.shadowNamespace()); ok {
						present = append(present, o[0]+"/"+o[1])
					}
				}
				return len(present) == 0, "still there: " + strings.Join(present, ", ")
			}

			mustKubectl(t, "", "patch", "pod", p.name, "-n", p.namespace, "--subresource=status", "--type=merge",
				"-p", `{"status":{"phase":"`+phase+`"}}`)
			finished := time.Now()
			if got := mustKubectl(t, "", "get", "pod", p.name, "-n", p.namespace, "-o", "jsonpath={.status.phase}"); got != phase {
				t.Fatalf("the pod's phase is %q after the status patch, want %s", got, phase)
			}
			// A third of the grace period: were the deletion waiting for the grace period, as for
			// a shadow whose pod was never stored, it could not happen within this window.
			eventually(t, gracePeriod/3, "the finished pod's shadow is deleted well before the grace period", left)
			t.Logf("shadow deleted %s after the pod became %s", time.Since(finished).Round(time.Millisecond), phase)
			eventually(t, gracePeriod/3, "the reconciler logs that it deleted the shadow of a finished pod", func() (bool, string) {
				log, err := os.ReadFile(cluster.sg.Log)
				if err != nil {
					t.Fatal(err)
				}
				for line := range strings.Lines(string(log)) {
					if strings.Contains(line, "deleted shadow object whose pod has finished") &&
						strings.Contains(line, p.shadowNamespace()+"/"+p.shadowName()) && strings.Contains(line, `"`+phase+`"`) {
						return true, line
					}
				}
				return false, "no such log line"
			})

			// The deletions wake the reconciler for this pod again; a live pod's deleted shadow is
			// back within a second or two (TestADeletedShadowComesBack), a finished pod's stays gone.
			deadline := time.Now().Add(gracePeriod / 3)
			for time.Now().Before(deadline) {
				if gone, out := left(); !gone {
					t.Fatalf("the shadow of the %s pod was applied again: %s", phase, out)
				}
				time.Sleep(500 * time.Millisecond)
			}
			if ok, out := exists(t, "pod", p.name, "-n", p.namespace); !ok {
				t.Fatalf("the finished pod itself is gone, so this tested a deleted pod: %s", out)
			}
		})
	}
}
