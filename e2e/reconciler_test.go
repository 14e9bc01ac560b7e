package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Deleting a pod removes its shadow at once: the reconciler saw the pod go.
func TestDeletingThePodRemovesItsShadow(t *testing.T) {
	createNamespaces(t, "gone")
	p := offloaded{name: "trainer", namespace: "gone", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, p.json(), "apply", "-f", "-")
	for _, kind := range []string{"deployment", "service"} {
		if ok, out := exists(t, kind, p.shadowName(), "-n", p.shadowNamespace()); !ok {
			t.Fatalf("no shadow %s: %s", kind, out)
		}
	}
	mustKubectl(t, "", "delete", "pod", p.name, "-n", p.namespace)
	deleted := time.Now()
	// A third of the grace period: were the deletion waiting for the grace period instead of
	// acting at once, it could not happen within this window.
	eventually(t, gracePeriod/3, "the shadow is deleted well before the grace period", func() (bool, string) {
		d, out := exists(t, "deployment", p.shadowName(), "-n", p.shadowNamespace())
		s, _ := exists(t, "service", p.shadowName(), "-n", p.shadowNamespace())
		c, _ := exists(t, "configmap", p.shadowName()+"-node", "-n", p.shadowNamespace())
		return !d && !s && !c, out
	})
	t.Logf("shadow deleted %s after its pod", time.Since(deleted).Round(time.Millisecond))
}

// A pod refused by an admission step after shadowgate's (here the ResourceQuota plugin, which
// kube-apiserver runs after the validating webhooks) is never stored; its shadow, applied
// meanwhile, is collected after the grace period, and not before.
func TestShadowOfAPodRefusedLaterIsCollectedAfterTheGracePeriod(t *testing.T) {
	createNamespaces(t, "later")
	mustKubectl(t, `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"no-pods","namespace":"later"},"spec":{"hard":{"pods":"0"}}}`, "apply", "-f", "-")
	mustKubectl(t, "", "patch", "resourcequota", "no-pods", "-n", "later", "--subresource=status", "--type=merge",
		"-p", `{"status":{"hard":{"pods":"0"},"used":{"pods":"0"}}}`)
	p := offloaded{name: "trainer", namespace: "later", node: "hpc-vk", ports: []int32{8888}}
	r := kubectl(t, p.json(), "apply", "-f", "-")
	refused := time.Now()
	if r.Err == nil || !strings.Contains(r.Stderr, "exceeded quota: no-pods") {
		t.Fatalf("want the quota to refuse the pod; kubectl printed:\n%s", r.Output())
	}
	if ok, out := exists(t, "deployment", p.shadowName(), "-n", p.shadowNamespace()); !ok {
		t.Fatalf("shadowgate applied no shadow before the quota refused the pod: %s", out)
	}
	time.Sleep(gracePeriod / 2)
	if ok, _ := exists(t, "deployment", p.shadowName(), "-n", p.shadowNamespace()); !ok {
		t.Fatalf("the shadow was deleted %s after the refusal, before the grace period of %s", time.Since(refused), gracePeriod)
	}
	// The grace period runs from when the reconciler first finds the shadow orphaned, a moment
	// after the refusal; another grace period from here leaves it half a grace period of slack.
	eventually(t, gracePeriod, "the orphaned shadow is collected", func() (bool, string) {
		d, out := exists(t, "deployment", p.shadowName(), "-n", p.shadowNamespace())
		s, _ := exists(t, "service", p.shadowName(), "-n", p.shadowNamespace())
		return !d && !s, out
	})
	t.Logf("orphaned shadow collected %s after the refusal (grace period %s)", time.Since(refused).Round(time.Millisecond), gracePeriod)
}

// A shadow deleted while its pod lives is applied again.
func TestADeletedShadowComesBack(t *testing.T) {
	createNamespaces(t, "comeback")
	p := offloaded{name: "trainer", namespace: "comeback", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, p.json(), "apply", "-f", "-")
	uid := func() string {
		return mustKubectl(t, "", "get", "deployment", p.shadowName(), "-n", p.shadowNamespace(), "-o", "jsonpath={.metadata.uid}")
	}
	before := uid()
	mustKubectl(t, "", "delete", "deployment", p.shadowName(), "-n", p.shadowNamespace())
	eventually(t, gracePeriod/2, "the shadow Deployment is re-applied", func() (bool, string) {
		ok, out := exists(t, "deployment", p.shadowName(), "-n", p.shadowNamespace())
		return ok && uid() != before, out
	})
}

// A pod stored while the webhooks were not called, and that the mutating webhook would have
// prepared (here: it asks for a reverse tunnel, so it needs a bind address and the pre-exec
// snippet), gets no shadow from the reconciler: its job would run without the tunnel.
func TestReconcilerLeavesAPodTheMutatingWebhookNeverPreparedWithoutShadow(t *testing.T) {
	createNamespaces(t, "unprepared")
	p := offloaded{name: "trainer", namespace: "unprepared", node: "hpc-vk", ports: []int32{8888}, annotations: map[string]string{fwd: "minio:9000"}}
	reinstall := removeWebhooks(t)
	mustKubectl(t, p.json(), "apply", "-f", "-")
	reinstall()
	eventually(t, gracePeriod/2, "the reconciler says it leaves the unprepared pod without shadow", func() (bool, string) {
		log, err := os.ReadFile(cluster.sg.Log)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(log)) {
			if strings.Contains(line, "not re-applying what is missing of the shadow of a pod the policy in force refuses") &&
				strings.Contains(line, "mutating webhook (/mutate-pods) did not run") && strings.Contains(line, `"unprepared/trainer"`) {
				return true, line
			}
		}
		return false, "no such log line"
	})
	if ok, out := exists(t, "deployment", p.shadowName(), "-n", p.shadowNamespace()); ok {
		t.Errorf("the reconciler applied the shadow of a pod the mutating webhook never prepared: %s", out)
	}
}
