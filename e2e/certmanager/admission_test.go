package certmanager

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
)

// The refused trainer and the guide's notebook behave at `kubectl apply` as with the
// self-signed install (e2e/refusals_test.go, e2e/shadow_test.go): refused with each field path
// `shadowgate check` names, and admitted with its shadow. The API server reaches serve over
// TLS that it verifies against the caBundle cainjector injected: the harness sets none.
func TestApplyOverCertManagerTLS(t *testing.T) {
	ctx := harness.TestContext(t, time.Minute)
	mustKubectl(ctx, t, "", "create", "namespace", "user")
	refused := filepath.Join(cluster.root, "cmd/shadowgate/testdata/refused-trainer.yaml")
	r := cluster.kubectl.Run(ctx, "", "apply", "-f", refused)
	if r.Err == nil {
		t.Fatalf("the refused trainer was admitted:\n%s", r.Output())
	}
	for _, line := range expectedRefusal(t, refused) {
		if !strings.Contains(r.Stderr, line) {
			t.Errorf("kubectl apply lacks %q; it printed:\n%s", line, r.Output())
		}
	}
	if out := cluster.kubectl.Run(ctx, "", "get", "pod", "trainer", "-n", "user"); out.Err == nil {
		t.Error("the refused pod was stored")
	}

	out := mustKubectl(ctx, t, "", "apply", "-f", filepath.Join(cluster.root, "manifests/examples/notebook.yaml"))
	if !strings.Contains(out, "pod/notebook created") {
		t.Errorf("kubectl apply printed:\n%s", out)
	}
	shadow, shadowNS := inject.ShadowName("notebook", "user", false), inject.ShadowNamespace("user", false)
	managed := mustKubectl(ctx, t, "", "get", "deployment", shadow, "-n", shadowNS,
		"-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by}`)
	if managed != inject.ManagedBy {
		t.Errorf("shadow Deployment %s/%s is managed by %q, want %q", shadowNS, shadow, managed, inject.ManagedBy)
	}
}

// expectedRefusal is "<field>: <type>" for each error `shadowgate check` reports for the file
// with the example policy, and the line kubectl prints first for an Invalid status.
func expectedRefusal(t *testing.T, file string) []string {
	t.Helper()
	lines, err := harness.Refusal(cluster.bin, filepath.Join(cluster.root, "manifests/examples/policy.yaml"), file)
	if err != nil {
		t.Fatal(err)
	}
	return append(lines, `The Pod "trainer" is invalid`)
}
