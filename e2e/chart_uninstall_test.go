package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// uninstallScript is the shell block of docs/install.md's "## Uninstalling", without its helm
// lines: the harness installs the chart's rendering, not a release.
func uninstallScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cluster.root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Uninstalling\n")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/install.md has no sh block under ## Uninstalling")
	}
	var lines []string
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "helm ") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}

// The commands docs/install.md gives to remove what shadowgate made, run as written on a
// cluster with its controllers, remove an offloaded pod's shadow (Deployment, Service,
// NetworkPolicy, node and scripts ConfigMaps), the shadow namespace shadowgate created with
// the credential copy in it, and a copy left in a namespace handed over to shadowgate, then
// shadowgate's namespace; they leave the offloaded pod, its namespace, a tenant's Secret that
// claims to be a copy in that namespace, and a namespace labelled as created by shadowgate
// without the marker only shadowgate and the admins may set.
func TestTheDocumentedUninstallRemovesWhatShadowgateMade(t *testing.T) {
	c := startChartCluster(t, harness.StartCluster)
	c.install(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := harness.InstallGatewayAPI(ctx, cluster.root, c.k); err != nil {
		t.Fatal(err)
	}
	c.must(t, helmTemplate(t, "--set-file", "policy="+writePolicyDocument(t), "--show-only", "templates/policy.yaml"),
		"apply", "--server-side", "--field-manager=e2e-install", "-f", "-")
	const ns = "leaving"
	c.must(t, "", "create", "namespace", ns)
	// An admin hands an existing namespace over to shadowgate for the shadows of "handed".
	c.must(t, "", "create", "namespace", "handed")
	c.must(t, "", "create", "namespace", "handed-shadow")
	c.must(t, "", "label", "namespace", "handed-shadow", "interlink.eu/shadow-namespace-for=handed")
	// What is not shadowgate's, whatever its labels say.
	c.must(t, "", "create", "namespace", "lookalike")
	c.must(t, "", "label", "namespace", "lookalike", "interlink.eu/created-by-shadowgate=true")
	c.must(t, "", "create", "secret", "generic", "hpc-ssh-key", "-n", ns, "--from-literal=k=v")
	c.must(t, "", "label", "secret", "hpc-ssh-key", "-n", ns, "interlink.eu/created-by-shadowgate=true")

	pods := []offloaded{{name: "trainer", namespace: ns, node: "hpc-vk", ports: []int32{8888}}, {name: "trainer", namespace: "handed", node: "hpc-vk", ports: []int32{8888}}}
	for _, p := range pods {
		// The ServiceAccount controller gives the new namespace its default account first.
		eventually(t, time.Minute, "pod "+p.namespace+"/"+p.name+" is created", func() (bool, string) {
			r := c.run(t, p.json(), "create", "-f", "-")
			return r.Err == nil, r.Output()
		})
		c.must(t, "", "get", "deployment/"+p.shadowName(), "service/"+p.shadowName(), "secret/hpc-ssh-key", "-n", p.shadowNamespace())
	}
	managed := func() string {
		return strings.TrimSpace(c.must(t, "", "get", "deployments,services,configmaps,networkpolicies,ingresses,httproutes.gateway.networking.k8s.io",
			"-A", "-l", "app.kubernetes.io/managed-by=shadowgate", "-o", "name"))
	}
	if managed() == "" {
		t.Fatal("no object labelled app.kubernetes.io/managed-by=shadowgate before the uninstall")
	}

	// The script's scale stops the chart's replicas; the harness's serve runs outside the
	// cluster, so it stops here, or its reconciler would apply the shadows of the live pods again.
	if err := c.sg.Stop(); err != nil {
		t.Fatal(err)
	}
	c.sg = nil
	bin := t.TempDir()
	if err := os.Symlink(c.k.Path, filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", uninstallScript(t))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+c.cp.AdminKubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the documented uninstall failed: %v\n%s", err, out)
	}

	if left := managed(); left != "" {
		t.Errorf("shadow objects left after the uninstall:\n%s", left)
	}
	for _, gone := range []string{"namespace/leaving-shadow", "secret/hpc-ssh-key -n handed-shadow", "namespace/shadowgate-system"} {
		eventually(t, 2*time.Minute, gone+" is gone", func() (bool, string) {
			r := c.run(t, "", append([]string{"get", "--ignore-not-found", "-o", "name"}, strings.Fields(gone)...)...)
			return r.Err == nil && r.Stdout == "", r.Output()
		})
	}
	c.must(t, "", "get", "namespace/handed-shadow", "namespace/lookalike", "namespace/"+ns, "namespace/handed")
	c.must(t, "", "get", "pod/trainer", "secret/hpc-ssh-key", "-n", ns)
}
