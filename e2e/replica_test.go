package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// A second replica serves admissions at once but leaves the reconciler to the leader: the
// lease keeps its holder and the replica waits for it, so two replicas never fight over
// shadows. (What its endpoints answer to malformed requests: hostile_test.go.)
func TestASecondReplicaServesAndWaitsForTheLease(t *testing.T) {
	holder := func() string {
		return mustKubectl(t, "", "get", "lease", "shadowgate.interlink.eu", "-n", "shadowgate-system", "-o", "jsonpath={.spec.holderIdentity}")
	}
	leader := holder()
	if leader == "" {
		t.Fatal("no leader holds the lease")
	}
	b, err := harness.Serve(cluster.kubectl, cluster.cp, harness.ServeOptions{Bin: cluster.bin, Dir: t.TempDir(), GracePeriod: gracePeriod})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Stop(); err != nil {
			t.Errorf("the second replica did not stop cleanly: %v", err)
		}
	}()

	p := offloaded{name: "trainer", namespace: "replica", node: "hpc-vk", annotations: map[string]string{fwd: "minio:9000", bind: "127.0.0.1"}}
	review := harness.PodCreateReview("r1", "replica", "trainer", []byte(p.json()))
	r, err := b.Review("/validate-pods", 10*time.Second, "application/json", review)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.UID != "r1" || r.Result.Details == nil ||
		len(r.Result.Details.Causes) != 1 || r.Result.Details.Causes[0].Field != "metadata.annotations[interlink.eu/reverse-bind]" {
		t.Errorf("the second replica does not judge like the first: %+v", r)
	}

	if now := holder(); now != leader {
		t.Errorf("the lease moved from %s to %s when a second replica started", leader, now)
	}
	// Leader election runs on a goroutine of its own, started beside the webhook server that
	// made the replica ready and answered above: its first line may come after the review.
	var log []byte
	eventually(t, 30*time.Second, "the second replica logs its attempt to acquire the lease", func() (bool, string) {
		var err error
		log, err = os.ReadFile(b.Log)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(log), "Attempting to acquire leader lease"), "no such line in " + b.Log
	})
	if !strings.Contains(string(log), "Attempting to acquire leader lease") || strings.Contains(string(log), "Successfully acquired lease") {
		t.Errorf("the second replica should be waiting for the lease; its log:\n%s", log)
	}
}

// shadowgate serve does not start without a policy to decide by, and says which and why.
func TestServeRefusesToStartWithoutAValidPolicy(t *testing.T) {
	// Not named shadowgate-policy, so the configmaps webhook lets it be stored.
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: broken-policy, namespace: shadowgate-system}\ndata:\n  policy.yaml: |\n    virtualNodes:\n      hpc-vk:\n        Network: {ShadowMode: ssh, FullMesh: true}\n",
		"apply", "-f", "-")
	for name, want := range map[string]string{
		"missing-policy": "error: policy ConfigMap shadowgate-system/missing-policy does not exist: create it",
		"broken-policy":  "error: policy ConfigMap shadowgate-system/broken-policy is invalid, or asks for what this shadowgate may not do (shadowgate policy check finds the same offline, given serve's credential flags):\n* data[policy.yaml].virtualNodes[hpc-vk].Network.FullMesh: Invalid value: true: ",
	} {
		cmd := exec.Command(cluster.bin, "serve", "--kubeconfig", cluster.cp.ShadowgateKubeconfig, "--namespace", "shadowgate-system",
			"--policy-configmap", name, "--cert-dir", t.TempDir(), "--port", "0",
			"--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:0", "--log-format", "console")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("%s: want exit code 1, got %v:\n%s", name, err, out)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: output lacks %q:\n%s", name, want, out)
		}
	}
}
