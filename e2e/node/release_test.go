package node

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// TestTheReleaseInstallsFromTheRegistryAsASiteDoes publishes a release (make release) into the
// node's registry, verifies its signatures with the release's public key, installs the chart
// from the registry by the documented command alone (helm install oci://… --version), the node
// pulling the released webhook image by its digest, and proves with the released CLI and the
// chart's post-install check (helm test) that the API server reaches the installed webhook.
func TestTheReleaseInstallsFromTheRegistryAsASiteDoes(t *testing.T) {
	c := startChartNode(t)
	dir, k, node, root, helm, explain := c.dir, c.k, c.node, c.root, c.helm, c.explain
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rel, err := node.Release(ctx, root, filepath.Join(dir, "dist"), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.VerifyRelease(ctx, root, rel.Dist, rel.PublicKey); err != nil {
		t.Fatal(err)
	}

	// The API server calls the webhook at its Service's ClusterIP, from this machine.
	if err := node.RouteServices(); err != nil {
		t.Fatal(err)
	}
	install := exec.CommandContext(ctx, helm, "install", "shadowgate", rel.Chart, "--version", rel.Version, "--plain-http",
		"--namespace", harness.ReleaseNamespace, "--kubeconfig", k.Kubeconfig, "--wait", "--timeout=5m", "--set-file", "policy="+c.policyFile)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("helm install %s --version %s: %v\n%s\n%s", rel.Chart, rel.Version, err, out, explain())
	}

	// The node ran the released image, pulled by the digest the chart names.
	var pods struct {
		Items []struct {
			Spec   struct{ Containers []struct{ Image string } }
			Status struct{ ContainerStatuses []struct{ ImageID string } }
		}
	}
	out := k.MustRun(ctx, t, "", "get", "pods", "-n", harness.ReleaseNamespace, "-l", "app.kubernetes.io/name=shadowgate", "-o", "json")
	if err := json.Unmarshal([]byte(out), &pods); err != nil || len(pods.Items) == 0 {
		t.Fatalf("no shadowgate pod (%v):\n%s", err, out)
	}
	_, digest, _ := strings.Cut(rel.WebhookImage, "@")
	for _, p := range pods.Items {
		if len(p.Spec.Containers) == 0 || len(p.Status.ContainerStatuses) == 0 || !strings.HasSuffix(p.Spec.Containers[0].Image, "@"+digest) ||
			!strings.Contains(p.Status.ContainerStatuses[0].ImageID, digest) {
			t.Errorf("a shadowgate pod runs %+v, want the released image %s pulled by its digest", p, rel.WebhookImage)
		}
	}

	// The released CLI, for this machine, finds the webhook judging a dry-run pod.
	cli := filepath.Join(dir, "cli")
	if err := os.MkdirAll(cli, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(rel.Dist, "kubectl-shadowgate_v"+rel.Version+"_linux_amd64.tar.gz")
	if out, err := exec.CommandContext(ctx, "tar", "-xzf", archive, "-C", cli).CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s: %v\n%s", archive, err, out)
	}
	check := exec.CommandContext(ctx, filepath.Join(cli, "kubectl-shadowgate"), "check", "install", "--kubeconfig", k.Kubeconfig, "-n", "default", "--wait=2m")
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "shadowgate judged a dry-run pod in namespace default") {
		t.Errorf("the released kubectl-shadowgate check install: %v\n%s\n%s", err, out, explain())
	}
	// And the chart's post-install check, run by the released image from a pod.
	if out, err := harness.HelmTest(ctx, helm, k, "name=shadowgate-install-check"); err != nil {
		t.Errorf("helm test: %v\n%s\n%s", err, out, explain())
	}
}
