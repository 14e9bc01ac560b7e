package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// policyConfigMap wraps a policy document in the policy ConfigMap.
func policyConfigMap(t *testing.T, doc string) string {
	t.Helper()
	indented := "    " + strings.ReplaceAll(strings.TrimRight(doc, "\n"), "\n", "\n    ")
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shadowgate-policy\n  namespace: shadowgate-system\ndata:\n  policy.yaml: |\n" + indented + "\n"
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
	eventually(t, 10*time.Second, "the new policy refuses reverse forwards on wst-vk", func() (bool, string) {
		r := kubectl(t, p.json(), "apply", "--dry-run=server", "-f", "-")
		return r.Err != nil && strings.Contains(r.Stderr, "metadata.annotations[interlink.eu/reverse-forwards]: Forbidden: virtual node wst-vk does not offer the reverse tunnel"), r.Output()
	})
}

// A policy stored past the webhook (here: while the webhooks are not registered) is not
// loaded: shadowgate keeps deciding by the last valid one and says so in a Warning Event on
// the ConfigMap and a metric.
func TestStoredInvalidPolicyKeepsTheLastValidOne(t *testing.T) {
	createNamespaces(t, "keeppolicy")
	restoreExamplePolicy(t)
	reinstall := removeWebhooks(t)
	mustKubectl(t, policyConfigMap(t, "virtualNodes:\n  hpc-vk:\n    Network:\n      ShadowMode: carrier-pigeon\n"), "apply", "-f", "-")
	reinstall()
	eventually(t, 10*time.Second, "a Warning Event InvalidPolicy on the policy ConfigMap", func() (bool, string) {
		out := mustKubectl(t, "", "get", "events", "-n", "shadowgate-system", "--field-selector",
			"involvedObject.name=shadowgate-policy,reason=InvalidPolicy,type=Warning", "-o", "custom-columns=NOTE:.message", "--no-headers")
		return strings.Contains(out, "policy not loaded, shadowgate still serves the last valid one") &&
			strings.Contains(out, "carrier-pigeon"), out
	})
	metrics, err := cluster.sg.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	expectContains(t, metrics, `shadowgate_policy_reloads_total{result="invalid"}`)
	// Still the example policy: hpc-vk is an SSH node with the reverse tunnel.
	p := offloaded{name: "trainer", namespace: "keeppolicy", node: "hpc-vk", annotations: map[string]string{fwd: "minio:9000", bind: "127.0.0.1"}}
	r := kubectl(t, p.json(), "apply", "--dry-run=server", "-f", "-")
	expectContains(t, r.Stderr, `metadata.annotations[interlink.eu/reverse-bind]: Invalid value: "127.0.0.1": `)
}
