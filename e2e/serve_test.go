package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// servedCertificate is the leaf certificate the webhook server presents right now.
func servedCertificate(t *testing.T) *x509.Certificate {
	t.Helper()
	c, err := harness.ServedCertificate(cluster.sg.Port, nil, "") // only read, verified by the caller
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Certificate files replaced on disk are served without a restart, and admission goes on
// once the webhooks carry the new CA.
func TestReplacedCertificatesAreServedWithoutRestart(t *testing.T) {
	createNamespaces(t, "rotation")
	before := servedCertificate(t)
	ca, err := cluster.sg.RotateCerts()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	eventually(t, 20*time.Second, "the new certificate is served", func() (bool, string) {
		leaf := servedCertificate(t)
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"})
		return err == nil && !bytes.Equal(leaf.Raw, before.Raw), fmt.Sprint(err)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.sg.InstallWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	p := offloaded{name: "trainer", namespace: "rotation", node: "hpc-vk", ports: []int32{8888}}
	expectContains(t, mustKubectl(t, p.json(), "apply", "-f", "-"), "pod/trainer created")
	if err := cluster.sg.Exited(); err != nil {
		t.Fatal(err)
	}
}

// /healthz and /readyz answer, and the metrics name decisions, shadow applies and reloads.
func TestHealthAndMetrics(t *testing.T) {
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body, err := cluster.sg.Probe(path)
		if err != nil || code != http.StatusOK {
			t.Errorf("%s: %d %s %v", path, code, body, err)
		}
	}
	createNamespaces(t, "metrics")
	// Other tests count too, and may run alongside: each series must grow by what this test
	// does, at least.
	series := []string{
		`shadowgate_admission_decisions_total{endpoint="/validate-pods",result="denied"}`,
		`shadowgate_admission_decisions_total{endpoint="/validate-pods",result="allowed"}`,
		`shadowgate_admission_decisions_total{endpoint="/mutate-pods",result="allowed"}`,
		`shadowgate_shadow_apply_duration_seconds_count{dry_run="false",result="ok"}`,
		`controller_runtime_webhook_requests_total{code="200",webhook="/validate-pods"}`,
	}
	before := metricValues(t, series)
	p := offloaded{name: "refused", namespace: "metrics", node: "hpc-vk", annotations: map[string]string{fwd: "minio:9000", bind: "127.0.0.1"}}
	if r := kubectl(t, p.json(), "apply", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, "metadata.annotations[interlink.eu/reverse-bind]") {
		t.Fatalf("the pod with a loopback reverse-bind was not refused for it; kubectl printed:\n%s", r.Output())
	}
	ok := offloaded{name: "admitted", namespace: "metrics", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, ok.json(), "apply", "-f", "-")
	after := metricValues(t, series)
	for _, s := range series {
		if after[s] < before[s]+1 {
			t.Errorf("%s went from %v to %v, want it counted", s, before[s], after[s])
		}
	}
}

// metricValues reads the named series from the metrics endpoint; a series not exposed yet
// counts as 0.
func metricValues(t *testing.T, series []string) map[string]float64 {
	t.Helper()
	return metricValuesOf(t, cluster.sg, series)
}

// metricValuesOf is metricValues of another serve than the suite's.
func metricValuesOf(t *testing.T, sg *harness.Shadowgate, series []string) map[string]float64 {
	t.Helper()
	text, err := sg.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for line := range strings.Lines(text) {
		for _, s := range series {
			if v, found := strings.CutPrefix(strings.TrimSpace(line), s+" "); found {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				values[s] = f
			}
		}
	}
	return values
}

// Pod-create latency with and without the webhook registered, in the same run: each pod is
// offloaded with a port, so with the webhook it is mutated, judged and gets its shadow
// applied before it is stored.
func TestPodCreateLatency(t *testing.T) {
	const n = 20
	createNamespaces(t, "latency-with", "latency-without")
	cfg := rest.CopyConfig(cluster.cp.Admin)
	cfg.QPS, cfg.Burst = 1000, 1000 // client-go's default of 5 per second would be what is measured
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	measure := func(ns string) []time.Duration {
		var took []time.Duration
		for i := range n {
			p := offloaded{name: fmt.Sprintf("pod-%d", i), namespace: ns, node: "hpc-vk", ports: []int32{8888}}
			pod := &corev1.Pod{}
			if err := yaml.Unmarshal([]byte(p.json()), pod); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		return took
	}
	with := measure("latency-with")
	reinstall := removeWebhooks(t)
	without := measure("latency-without")
	reinstall()
	// Reported, not asserted: on shared, loaded machines a time limit fails for the machine.
	t.Logf("pod create, %d pods each: with the webhook p50 %s p95 %s; without p50 %s p95 %s",
		n, with[n/2].Round(time.Millisecond), with[n*95/100].Round(time.Millisecond),
		without[n/2].Round(time.Millisecond), without[n*95/100].Round(time.Millisecond))
	// Pods stored while the webhook was not registered get their shadows from the reconciler.
	missed := offloaded{name: "pod-0", namespace: "latency-without"}
	eventually(t, 15*time.Second, "the reconciler applies the shadow of a pod admitted without the webhook", func() (bool, string) {
		return exists(t, "deployment", missed.shadowName(), "-n", missed.shadowNamespace())
	})
}

// The in-cluster install (manifests/base) renders with kubectl kustomize and passes the API
// server's validation, and its Deployment meets the restricted Pod Security Standard of its
// namespace (the API server would warn otherwise). Each object is created, or for those the
// dev overlay installed, replaced whole, both as server-side dry runs.
func TestBaseManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	rendered := mustKubectl(t, "", "kustomize", cluster.root+"/manifests/base")
	docs := strings.Split(rendered, "\n---\n")
	if len(docs) < 10 {
		t.Fatalf("manifests/base renders %d objects:\n%s", len(docs), rendered)
	}
	var out strings.Builder
	for _, doc := range docs {
		r := kubectl(t, doc, "create", "--dry-run=server", "-f", "-")
		if r.Err != nil && strings.Contains(r.Stderr, "AlreadyExists") {
			r = kubectl(t, doc, "replace", "--dry-run=server", "-f", "-")
		}
		if r.Err != nil {
			t.Errorf("%v\n%s", r.Err, r.Output())
		}
		if strings.Contains(r.Stderr, "Warning") {
			t.Errorf("warnings from the API server:\n%s", r.Stderr)
		}
		out.WriteString(r.Stdout)
	}
	expectContains(t, out.String(), "deployment.apps/shadowgate created", "poddisruptionbudget.policy/shadowgate created",
		"service/shadowgate created", "mutatingwebhookconfiguration.admissionregistration.k8s.io/shadowgate replaced",
		"validatingwebhookconfiguration.admissionregistration.k8s.io/shadowgate replaced",
		"clusterrole.rbac.authorization.k8s.io/shadowgate replaced")
}
