package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// TestTheChartServesFromTheNodesNetworkAtAURL installs the chart as a managed cluster whose
// API server cannot reach pod addresses needs it: hostNetwork, the webhook on port 10443 of the
// node's address alone (extraArgs --bind-address=$(HOST_IP), extraEnv from status.hostIP), and
// webhooks.url naming that address, so the API server (on this machine) calls the node
// directly, with no route to the Service range or the pods. The replica runs with the
// node's address and listens on the node's ports; `shadowgate check install` from here and the
// chart's own `helm test` (its install check, from a pod) both see shadowgate judge a dry-run
// pod, and the refused trainer is refused with the field paths `shadowgate check` names.
func TestTheChartServesFromTheNodesNetworkAtAURL(t *testing.T) {
	c := startChartNode(t)
	k, node, root, policyFile, explain, helm := c.k, c.node, c.root, c.policyFile, c.explain, c.helm
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	image, bin := c.webhook(ctx, t)
	// The node's network is a host namespace, which the restricted level refuses (docs/install.md).
	k.MustRun(ctx, t, "", "label", "namespace", harness.ReleaseNamespace, "pod-security.kubernetes.io/enforce=privileged", "--overwrite")
	// One node: with the ports on the node, a second replica would have nowhere to run.
	const port = 10443
	url := fmt.Sprintf("https://%s:%d", node.IP, port)
	if err := harness.HelmInstall(ctx, helm, k, root, image.Name, "--set-file", "policy="+policyFile,
		"--set", "replicas=1", "--set", "hostNetwork=true", "--set", fmt.Sprintf("webhooks.port=%d", port),
		"--set", "probesPort=10481", "--set", "metrics.port=10480", "--set", "webhooks.url="+url,
		// serve on the node's address only, as the chart's values document.
		"--set", "extraArgs={--bind-address=$(HOST_IP)}",
		"--set", "extraEnv[0].name=HOST_IP", "--set", "extraEnv[0].valueFrom.fieldRef.fieldPath=status.hostIP"); err != nil {
		t.Fatalf("%v\n%s", err, explain())
	}

	var pods struct {
		Items []struct {
			Spec   struct{ HostNetwork bool }
			Status struct{ PodIP string }
		}
	}
	out := k.MustRun(ctx, t, "", "get", "pods", "-n", harness.ReleaseNamespace, "-l", "app.kubernetes.io/name=shadowgate", "-o", "json")
	if err := json.Unmarshal([]byte(out), &pods); err != nil || len(pods.Items) != 1 || !pods.Items[0].Spec.HostNetwork || pods.Items[0].Status.PodIP != node.IP {
		t.Fatalf("want one shadowgate pod in the node's network, at %s (%v):\n%s", node.IP, err, out)
	}
	urls := k.MustRun(ctx, t, "", "get", "validatingwebhookconfiguration", "shadowgate", "-o", "jsonpath={.webhooks[*].clientConfig.url}")
	if !strings.HasPrefix(urls, url+"/") {
		t.Fatalf("the webhooks are not called at %s: %s", url, urls)
	}

	check := exec.CommandContext(ctx, bin, "check", "install", "--kubeconfig", k.Kubeconfig, "-n", "default", "--wait=2m")
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "shadowgate judged a dry-run pod in namespace default") {
		t.Errorf("shadowgate check install: %v\n%s\n%s", err, out, explain())
	}
	if out, err := harness.HelmTest(ctx, helm, k, "name=shadowgate-install-check"); err != nil {
		t.Errorf("helm test: %v\n%s\n%s", err, out, explain())
	}

	k.CreateNamespaces(ctx, t, "user")
	c.expectTheRefusedTrainerRefused(ctx, t, bin)
}
