package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
)

// TestTheChartRunsOnTheRealNode installs the chart as docs/install.md does, with helm, its
// webhook running as the chart's two pods from shadowgate's image (the Dockerfile, built by
// hack/build-image.sh) pulled by the node: the API server calls them through the Service's
// ClusterIP, and they refuse the refused trainer with the field paths `shadowgate check`
// names, and admit the guide's notebook and apply its shadow, with the credentials' copies,
// with their own ServiceAccount.
func TestTheChartRunsOnTheRealNode(t *testing.T) {
	c := startChartNode(t)
	k, node, root, policyFile, explain := c.k, c.node, c.root, c.policyFile, c.explain
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	image, bin := c.webhook(ctx, t)
	// The API server calls the webhook at its Service's ClusterIP, from this machine.
	if err := node.RouteServices(); err != nil {
		t.Fatal(err)
	}
	if err := harness.HelmInstall(ctx, c.helm, k, root, image.Name, "--set-file", "policy="+policyFile); err != nil {
		t.Fatalf("%v\n%s", err, explain())
	}

	var pods struct {
		Items []struct {
			Spec   struct{ NodeName string }
			Status struct {
				PodIP             string
				ContainerStatuses []struct{ Image, ImageID string }
			}
		}
	}
	out := k.MustRun(ctx, t, "", "get", "pods", "-n", harness.ReleaseNamespace, "-l", "app.kubernetes.io/name=shadowgate", "-o", "json")
	if err := json.Unmarshal([]byte(out), &pods); err != nil || len(pods.Items) != 2 {
		t.Fatalf("the release's pods (%v), want 2:\n%s", err, out)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != nodeName || !strings.HasPrefix(p.Status.PodIP, strings.TrimSuffix(node.PodCIDR, "0/24")) ||
			len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Image != image.Name ||
			!strings.Contains(p.Status.ContainerStatuses[0].ImageID, "@sha256:") {
			t.Errorf("a shadowgate pod is not the image's on the node by digest, with a pod address: %+v", p)
		}
	}

	k.CreateNamespaces(ctx, t, "user")
	c.expectTheRefusedTrainerRefused(ctx, t, bin)

	// The credentials the example policy names, as an admin creates them: the dev overlay's
	// stand-ins.
	k.MustRun(ctx, t, "", "apply", "-f", filepath.Join(root, "manifests/overlays/dev/credentials.yaml"))
	k.MustRun(ctx, t, "", "apply", "-f", filepath.Join(root, "manifests/examples/notebook.yaml"))
	shadow, shadowNS := inject.ShadowName("notebook", "user", false), inject.ShadowNamespace("user", false)
	managed := k.MustRun(ctx, t, "", "get", "deployment", shadow, "-n", shadowNS,
		"-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by}`)
	if managed != inject.ManagedBy {
		t.Errorf("shadow Deployment %s/%s is managed by %q, want %q", shadowNS, shadow, managed, inject.ManagedBy)
	}
	k.MustRun(ctx, t, "", "get", "secret", "hpc-ssh-key", "-n", shadowNS)
}

// policyDocument is the policy of a ConfigMap manifest such as manifests/examples/policy.yaml,
// as the chart's policy value takes it.
func policyDocument(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(data, &cm); err != nil || cm.Data["policy.yaml"] == "" {
		t.Fatalf("%s: no ConfigMap with policy.yaml (%v)", file, err)
	}
	return cm.Data["policy.yaml"]
}

// chartNode is a real node ready for a chart install: helm built, the release namespace made
// and the example policy's document written.
type chartNode struct {
	dir, root, helm, examplePolicy, policyFile string
	k                                          harness.Kubectl
	node                                       *harness.Node
}

func startChartNode(t *testing.T) *chartNode {
	t.Helper()
	dir, k, node, _ := startNode(t)
	c := &chartNode{dir: dir, k: k, node: node, policyFile: filepath.Join(dir, "policy.yaml")}
	var err error
	if c.root, err = filepath.Abs("../.."); err != nil {
		t.Fatal(err)
	}
	if c.helm, err = harness.BuildHelm(c.root, os.Stderr); err != nil {
		t.Fatal(err)
	}
	c.examplePolicy = filepath.Join(c.root, "manifests/examples/policy.yaml")
	if err := os.WriteFile(c.policyFile, []byte(policyDocument(t, c.examplePolicy)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := harness.CreateReleaseNamespace(ctx, k); err != nil {
		t.Fatal(err)
	}
	return c
}

// explain names the node's logs, for a failure's message.
func (c *chartNode) explain() string {
	return "the node's logs: " + strings.Join(c.node.LogPaths(), ", ")
}

// webhook builds shadowgate's image (hack/build-image.sh) and binary, and pushes the image to
// the node's registry under its own name, which the chart then runs.
func (c *chartNode) webhook(ctx context.Context, t *testing.T) (harness.WebhookImage, string) {
	t.Helper()
	image, err := harness.BuildWebhookImage(c.root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := harness.BuildShadowgate(c.root, c.dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.node.PushMirrored(ctx, image.Archive, image.Name); err != nil {
		t.Fatal(err)
	}
	return image, bin
}

// expectTheRefusedTrainerRefused applies cmd/shadowgate/testdata/refused-trainer.yaml into
// namespace user and expects it refused with the field paths `shadowgate check` (bin) names
// for it under the example policy.
func (c *chartNode) expectTheRefusedTrainerRefused(ctx context.Context, t *testing.T, bin string) {
	t.Helper()
	refused := filepath.Join(c.root, "cmd/shadowgate/testdata/refused-trainer.yaml")
	r := c.k.Run(ctx, "", "apply", "-f", refused)
	if r.Err == nil {
		t.Fatalf("the refused trainer was admitted:\n%s", r.Output())
	}
	lines, err := harness.Refusal(bin, c.examplePolicy, refused)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range lines {
		if !strings.Contains(r.Stderr, line) {
			t.Errorf("kubectl apply lacks %q; it printed:\n%s", line, r.Output())
		}
	}
}
