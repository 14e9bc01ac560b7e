package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
)

// chartCluster is a control plane of its own for installing the chart, whose objects have the
// names of the suite's kustomize install.
type chartCluster struct {
	k   harness.Kubectl
	cp  *harness.ControlPlane
	dir string
	sg  *harness.Shadowgate
}

// newChartCluster starts the control plane and, as docs/install.md installs, creates the release
// namespace with its Pod Security level.
func newChartCluster(t *testing.T) *chartCluster {
	t.Helper()
	return startChartCluster(t, harness.StartControlPlane)
}

// startChartCluster is newChartCluster with the control plane start gives (harness.StartCluster
// runs the controllers too).
func startChartCluster(t *testing.T, start func(harness.Tools, string) (*harness.ControlPlane, error)) *chartCluster {
	t.Helper()
	tools, err := harness.BuildTools(cluster.root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	c := &chartCluster{}
	if c.dir, err = os.MkdirTemp("", "shadowgate-chart-"); err != nil {
		t.Fatal(err)
	}
	if c.cp, err = start(tools, c.dir); err != nil {
		t.Fatal(err)
	}
	c.k = harness.Kubectl{Path: tools.Kubectl, Kubeconfig: c.cp.AdminKubeconfig}
	t.Cleanup(func() {
		if c.sg != nil {
			if err := c.sg.Stop(); err != nil {
				t.Errorf("shadowgate serve did not stop cleanly: %v", err)
			}
		}
		if err := c.cp.Stop(); err != nil {
			t.Errorf("stopping the chart's control plane: %v", err)
		}
		if t.Failed() {
			t.Logf("the chart's control plane and shadowgate logs are kept in %s", c.dir)
		} else {
			os.RemoveAll(c.dir)
		}
	})
	c.must(t, "", "create", "namespace", "shadowgate-system")
	c.must(t, "", "label", "namespace", "shadowgate-system", "pod-security.kubernetes.io/enforce=restricted")
	return c
}

// install installs the chart's rendering (for default values, or helm template's extra args)
// and serves it, then creates the Secrets and ConfigMaps the example policy names (the dev
// overlay's stand-ins).
func (c *chartCluster) install(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	c.sg, err = harness.InstallChart(ctx, c.k, c.cp, helmTemplate(t, args...), harness.ServeOptions{Bin: cluster.bin, Dir: c.dir, GracePeriod: gracePeriod})
	if err != nil {
		t.Fatal(err)
	}
	c.must(t, "", "apply", "-f", filepath.Join(cluster.root, "manifests/overlays/dev/credentials.yaml"))
}

func (c *chartCluster) run(t *testing.T, stdin string, args ...string) harness.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.k.Run(ctx, stdin, args...)
}

func (c *chartCluster) must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := c.run(t, stdin, args...)
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Output())
	}
	return r.Stdout
}

// verdict is what kubectl reports for a server-side dry-run create: whether the object was
// admitted, every warning and error line, and the annotation keys of the admitted object (the
// mutation; their values hold a randomly chosen address).
type verdict struct {
	Admitted    bool
	Messages    string
	Annotations []string
}

func judge(r harness.Result) verdict {
	v := verdict{Admitted: r.Err == nil, Messages: r.Stderr}
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal([]byte(r.Stdout), &obj) == nil {
		for k := range obj.Metadata.Annotations {
			v.Annotations = append(v.Annotations, k)
		}
		sort.Strings(v.Annotations)
	}
	return v
}

// The chart's rendering for default values, installed into a real API server and given the
// example policy through the policy value, admits, mutates, warns about and refuses exactly
// what the suite's kustomize install does, down to each kubectl line. Its RBAC lets serve
// apply a shadow, and its webhooks reach serve through their Service reference with the
// chart's own certificate.
func TestChartInstallJudgesLikeKustomize(t *testing.T) {
	c := newChartCluster(t)
	c.install(t)
	const ns = "chart-parity"
	createNamespaces(t, ns)
	c.must(t, "", "create", "namespace", ns)

	// An invalid policy is refused by the chart's configmaps webhook, so the policy's
	// name and namespace in its matchConditions are the ones serve reads.
	invalid := policyConfigMap(t, "virtualNodes:\n  hpc-vk:\n    Network:\n      ShadowMode: carrier-pigeon\n")
	if r := c.run(t, invalid, "apply", "--server-side", "--field-manager=e2e-install", "-f", "-"); r.Err == nil {
		t.Fatalf("the chart's webhooks admit an invalid policy:\n%s", r.Output())
	}
	// `helm upgrade --set-file policy=...`, as far as the API server sees it.
	docFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(docFile, []byte(examplePolicyDocument(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.must(t, helmTemplate(t, "--set-file", "policy="+docFile, "--show-only", "templates/policy.yaml"),
		"apply", "--server-side", "--field-manager=e2e-install", "-f", "-")
	probe := offloaded{name: "probe", namespace: ns, node: "hpc-vk", annotations: map[string]string{fwd: "minio:9000", bind: "127.0.0.1"}}
	eventually(t, 15*time.Second, "the example policy is in force", func() (bool, string) {
		r := c.run(t, probe.json(), "create", "--dry-run=server", "-f", "-")
		return r.Err != nil && strings.Contains(r.Stderr, "interlink.eu/reverse-bind"), r.Output()
	})

	for name, pc := range parityCases(t, ns) {
		t.Run(name, func(t *testing.T) {
			args := []string{"create", "--dry-run=server", "-o", "json", "-f", "-"}
			want, got := judge(kubectl(t, pc.obj, args...)), judge(c.run(t, pc.obj, args...))
			if want.Admitted != pc.admitted {
				t.Fatalf("the kustomize install admitted: %v, want %v; the case is wrong:\n%s", want.Admitted, pc.admitted, want.Messages)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("kustomize install and chart disagree (-kustomize +chart):\n%s", diff)
			}
		})
	}

	// A real create: serve, with the chart's RBAC, applies the shadow.
	p := offloaded{name: "trainer", namespace: ns, node: "hpc-vk", ports: []int32{8888}}
	expectContains(t, c.must(t, p.json(), "apply", "-f", "-"), "pod/trainer created")
	c.must(t, "", "get", "deployment", p.shadowName(), "-n", p.shadowNamespace())

	// The metrics docs/install.md lists are what the chart's install serves.
	names := documentedMetrics(t)
	eventually(t, 15*time.Second, "every metric docs/install.md lists is served", func() (bool, string) {
		text, err := c.sg.Metrics()
		if err != nil {
			return false, err.Error()
		}
		for _, name := range names {
			if !strings.Contains(text, "\n"+name) {
				return false, name + " is missing"
			}
		}
		return true, ""
	})
}

// documentedMetrics are the metric names in the table under "### Metrics" in docs/install.md.
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cluster.root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(b), "### Metrics")
	table, _, _ = strings.Cut(table, "\n#")
	var names []string
	for _, line := range strings.Split(table, "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			names = append(names, name[:strings.Index(name, "`")])
		}
	}
	if len(names) == 0 {
		t.Fatal("docs/install.md lists no metrics under ### Metrics")
	}
	return names
}

type parityCase struct {
	obj      string
	admitted bool
}

// parityCases are objects to create in namespace ns, by what they exercise: every webhook,
// its rules, namespaceSelector and matchConditions, admitted and refused.
func parityCases(t *testing.T, ns string) map[string]parityCase {
	pod := func(name, node string, annotations map[string]string, ports ...int32) string {
		return offloaded{name: name, namespace: ns, node: node, annotations: annotations, ports: ports}.json()
	}
	badBind := map[string]string{fwd: "minio:9000", bind: "127.0.0.1"}
	return map[string]parityCase{
		"shadow":           {pod("shadow", "hpc-vk", nil, 8888), true},
		"reverse-forwards": {pod("reverse", "hpc-vk", map[string]string{fwd: "minio:9000 6443:kubernetes.default.svc:443"}), true},
		"refused-bind":     {pod("bind", "hpc-vk", badBind), false},
		"socks-allowed":    {pod("socks", "cern-vk", map[string]string{socks: "1080"}, 8888), true},
		"socks-refused":    {pod("nosocks", "hpc-vk", map[string]string{socks: "1080"}), false},
		"exempt-namespace": {offloaded{name: "exempt", namespace: "kube-system", node: "hpc-vk", annotations: badBind}.json(), true},
		"not-offloaded": {`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"elsewhere","namespace":"` + ns + `",` +
			`"annotations":{"interlink.eu/reverse-forwards":"minio:9000"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, true},
		"workload-template": {`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"trainers","namespace":"` + ns + `"},` +
			`"spec":{"selector":{"matchLabels":{"app":"t"}},"template":{"metadata":{"labels":{"app":"t"},` +
			`"annotations":{"interlink.eu/reverse-socks-port":"1080"}},"spec":{"nodeName":"hpc-vk","containers":[{"name":"c","image":"busybox"}]}}}}`, false},
		"node-configmap": {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"shadow-x-node","namespace":"` + ns + `",` +
			`"labels":{"interlink.eu/shadow-role":"node"}},"data":{"compute-node":"node1 -oProxyCommand=id"}}`, false},
		"invalid-policy": {policyConfigMap(t, "virtualNodes:\n  hpc-vk:\n    Network:\n      ShadowMode: carrier-pigeon\n"), false},
	}
}

// With webhooks.virtualNodes the chart's pod webhooks are sent a pod created with spec.nodeName
// only when it names a listed virtual node: a pod bound to an ordinary node (a debug pod, say)
// is not sent, so an outage would not refuse it, while one bound to hpc-vk is judged and gets
// its shadow. The API server compiles the rendered CEL when the chart is installed.
func TestChartVirtualNodesLimitsWhichBoundPodsAreSent(t *testing.T) {
	c := newChartCluster(t)
	c.install(t, "--set", "webhooks.virtualNodes={hpc-vk,cern-vk}")
	docFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(docFile, []byte(examplePolicyDocument(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.must(t, helmTemplate(t, "--set-file", "policy="+docFile, "--show-only", "templates/policy.yaml"),
		"apply", "--server-side", "--field-manager=e2e-install", "-f", "-")
	const ns = "chart-bound"
	c.must(t, "", "create", "namespace", ns)
	bound := func(name, node string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q},`+
			`"spec":{"nodeName":%q,"containers":[{"name":"main","image":"busybox","ports":[{"containerPort":8888}]}]}}`, name, ns, node)
	}
	mutated := `controller_runtime_webhook_requests_total{code="200",webhook="/mutate-pods"}`
	sentFor := func(pod string) float64 {
		t.Helper()
		before := metricValuesOf(t, c.sg, []string{mutated})[mutated]
		c.must(t, pod, "create", "--dry-run=server", "-f", "-")
		return metricValuesOf(t, c.sg, []string{mutated})[mutated] - before
	}
	if n := sentFor(bound("debug", "worker-1")); n != 0 {
		t.Errorf("a pod bound to worker-1 was sent to /mutate-pods %v times, want none", n)
	}
	if n := sentFor(bound("probe", "hpc-vk")); n != 1 {
		t.Errorf("a pod bound to hpc-vk was sent to /mutate-pods %v times, want once", n)
	}
	expectContains(t, c.must(t, bound("trainer", "hpc-vk"), "apply", "-f", "-"), "pod/trainer created")
	eventually(t, 15*time.Second, "the bound pod's shadow exists", func() (bool, string) {
		r := c.run(t, "", "get", "deployment", inject.ShadowName("trainer", ns, false), "-n", ns+"-shadow")
		return r.Err == nil, r.Output()
	})
}
