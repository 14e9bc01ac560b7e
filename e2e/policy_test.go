package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/validate"
)

// policyConfigMap wraps a policy document in the policy ConfigMap.
func policyConfigMap(t *testing.T, doc string) string {
	t.Helper()
	return harness.PolicyConfigMap(doc)
}

// restoreExamplePolicy puts the suite's policy back when the test ends.
func restoreExamplePolicy(t *testing.T) {
	t.Cleanup(func() {
		if r := kubectl(t, "", "apply", "-f", exampleFile("policy.yaml")); r.Err != nil {
			t.Errorf("restoring the example policy: %v\n%s", r.Err, r.Output())
		}
	})
}

// An invalid policy is refused at `kubectl apply` with its paths; a valid change is in force
// without a restart.
func TestPolicyIsCheckedAtApplyAndReloadedWithoutRestart(t *testing.T) {
	createNamespaces(t, "policy")
	restoreExamplePolicy(t)
	invalid := policyConfigMap(t, `virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      FullMesh: true
      SSH:
        LoginHst: login.hpc.example.org
        User: alice
        KeySecret: hpc-ssh-key
`)
	r := kubectl(t, invalid, "apply", "-f", "-")
	if r.Err == nil {
		t.Fatalf("an invalid policy was admitted; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, `The ConfigMap "shadowgate-policy" is invalid: `,
		`data[policy.yaml].virtualNodes[hpc-vk].Network.SSH.LoginHst: Invalid value: "LoginHst": unknown key`)

	// wst-vk is not in the example policy: reverse annotations on it are merely ignored.
	p := offloaded{name: "tunnel", namespace: "policy", node: "wst-vk", annotations: map[string]string{fwd: "minio:9000"}}
	r = kubectl(t, p.json(), "apply", "--dry-run=server", "-f", "-")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Output())
	}
	expectContains(t, r.Stderr, "Warning: metadata.annotations[interlink.eu/reverse-forwards] is ignored")

	example, err := os.ReadFile(exampleFile("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The same policy plus a wstunnel node, which offers no reverse tunnel.
	withWstunnel := strings.Replace(string(example), "    virtualNodes:\n", "    virtualNodes:\n      wst-vk:\n        Network:\n          ShadowMode: wstunnel\n", 1)
	mustKubectl(t, withWstunnel, "apply", "-f", "-")
	eventually(t, 30*time.Second, "the new policy refuses reverse forwards on wst-vk", func() (bool, string) {
		r := kubectl(t, p.json(), "apply", "--dry-run=server", "-f", "-")
		return r.Err != nil && strings.Contains(r.Stderr, "metadata.annotations[interlink.eu/reverse-forwards]: Forbidden: virtual node wst-vk does not offer the reverse tunnel"), r.Output()
	})
}

// The policy ConfigMap deleted, then an invalid one stored past the webhook (here: while the
// webhooks are not registered): shadowgate keeps deciding by the last valid policy, and says
// so each time in a Warning Event on the ConfigMap and in a metric.
func TestStoredInvalidPolicyKeepsTheLastValidOne(t *testing.T) {
	createNamespaces(t, "keeppolicy")
	restoreExamplePolicy(t)
	// A pod only the example policy admits as the webhook would: hpc-vk is an SSH node with
	// the reverse tunnel, so the pod is admitted with a loopback bind address the webhook
	// chose. Without that policy, the reverse annotation would be ignored, with a warning.
	p := offloaded{name: "trainer", namespace: "keeppolicy", node: "hpc-vk", annotations: map[string]string{fwd: "minio:9000"}}
	judged := 0
	judgedByExample := func() {
		t.Helper()
		r := kubectl(t, p.json(), "apply", "--dry-run=server", "-o", "yaml", "-f", "-")
		if r.Err != nil || strings.Contains(r.Stderr, "is ignored") || !strings.Contains(r.Stdout, validate.AnnotationReverseBind+": 127.") {
			t.Fatalf("the pod was not judged by the example policy (admitted with the webhook's bind address): %v\n%s", r.Err, r.Output())
		}
		judged++
	}
	// Generous: an Event is written asynchronously, and the wait is not what is measured.
	warning := func(reason string, want ...string) {
		t.Helper()
		eventually(t, time.Minute, "a Warning Event "+reason+" on the policy ConfigMap", func() (bool, string) {
			out := mustKubectl(t, "", "get", "events", "-n", "shadowgate-system", "--field-selector",
				"involvedObject.name=shadowgate-policy,reason="+reason+",type=Warning", "-o", "custom-columns=NOTE:.message", "--no-headers")
			for _, w := range want {
				if !strings.Contains(out, w) {
					return false, out
				}
			}
			return true, out
		})
	}
	reloads := func(result string) int {
		t.Helper()
		metrics, err := cluster.sg.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		line := regexp.MustCompile(`(?m)^shadowgate_policy_reloads_total\{result="` + result + `"\} (\d+)$`).FindStringSubmatch(metrics)
		if line == nil {
			return 0 // a counter is not exported before it is first counted
		}
		n, err := strconv.Atoi(line[1])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Each state change counts once more in the metric than before it.
	countedOnce := func(result string, before int) {
		t.Helper()
		eventually(t, time.Minute, "shadowgate_policy_reloads_total{result="+result+"} counts the change once", func() (bool, string) {
			n := reloads(result)
			return n == before+1, fmt.Sprintf("%d, was %d", n, before)
		})
	}

	judgedByExample()
	deletedBefore, invalidBefore := reloads("deleted"), reloads("invalid")
	mustKubectl(t, "", "delete", "configmap", "shadowgate-policy", "-n", "shadowgate-system")
	warning("PolicyDeleted", "policy ConfigMap deleted; shadowgate serves the last valid policy")
	countedOnce("deleted", deletedBefore)
	judgedByExample()

	reinstall := removeWebhooks(t)
	mustKubectl(t, policyConfigMap(t, "virtualNodes:\n  hpc-vk:\n    Network:\n      ShadowMode: carrier-pigeon\n"), "apply", "-f", "-")
	reinstall()
	warning("InvalidPolicy", "policy not loaded, shadowgate still serves the last valid one", "carrier-pigeon")
	countedOnce("invalid", invalidBefore)
	judgedByExample()
	events := 0
	for _, reason := range []string{"PolicyDeleted", "InvalidPolicy"} {
		events += len(strings.Fields(mustKubectl(t, "", "get", "events", "-n", "shadowgate-system", "--field-selector",
			"involvedObject.name=shadowgate-policy,reason="+reason+",type=Warning", "-o", "name")))
	}
	harness.Scenario("policy-deleted-or-invalid", "deleted_reloads_delta", reloads("deleted")-deletedBefore,
		"invalid_reloads_delta", reloads("invalid")-invalidBefore, "warning_events", events, "pods_judged_by_last_valid", judged-1)
}
