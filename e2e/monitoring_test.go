package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// The API server exports, for a call to shadowgate's webhook that refuses a pod, the metrics
// the monitoring bundle's webhook alerts read (internal/metrics lists them), under the names and
// labels the alerts select: the webhook's name under .shadowgate.interlink.eu, rejected,
// error_type, le.
func TestTheAPIServerExportsTheMetricsTheAlertsRead(t *testing.T) {
	createNamespaces(t, "monitoring")
	p := offloaded{name: "refused", namespace: "monitoring", node: "hpc-vk", annotations: map[string]string{fwd: "minio:http"}, ports: []int32{8888}}
	if r := kubectl(t, p.json(), "apply", "-f", "-"); r.Err == nil {
		t.Fatalf("a pod with a bad forward was admitted:\n%s", r.Output())
	}
	webhook := `name="[a-z-]+\.shadowgate\.interlink\.eu"`
	for _, want := range []string{
		`apiserver_admission_webhook_request_total\{code="[0-9]+",` + webhook + `,operation="CREATE",rejected="true",type="(admit|validating)"\} [1-9]`,
		`apiserver_admission_webhook_rejection_count\{error_type="no_error",` + webhook + `,operation="CREATE",rejection_code="[0-9]+",type="(admit|validating)"\} [1-9]`,
		`apiserver_admission_webhook_admission_duration_seconds_bucket\{` + webhook + `,operation="CREATE",rejected="true",type="(admit|validating)",le="\+Inf"\} [1-9]`,
	} {
		eventually(t, time.Minute, "the API server's /metrics to hold "+want, func() (bool, string) {
			out := mustKubectl(t, "", "get", "--raw", "/metrics")
			return regexp.MustCompile(`(?m)^` + want).MatchString(out), harness.GrepLines(out, "apiserver_admission_webhook_")
		})
	}
}

// serve exports shadowgate_build_info with the version `shadowgate version` prints, and the
// expiry of the certificate it serves, read from its --cert-dir.
func TestServeExportsItsBuildAndItsCertificatesExpiry(t *testing.T) {
	out, err := exec.Command(cluster.bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^shadowgate (\S+) \(commit (\S+), (\S+),`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("shadowgate version printed %q", out)
	}
	info := fmt.Sprintf(`shadowgate_build_info{go_version=%q,revision=%q,version=%q} 1`, m[3], m[2], m[1])
	eventually(t, time.Minute, "serve to export "+info+" and its certificate's expiry", func() (bool, string) {
		metrics, err := cluster.sg.Metrics()
		if err != nil {
			return false, err.Error()
		}
		if !strings.Contains(metrics, "\n"+info+"\n") {
			return false, harness.GrepLines(metrics, "shadowgate_build_info")
		}
		pemBytes, err := os.ReadFile(filepath.Join(cluster.sg.CertDir, certs.CertFile))
		if err != nil {
			return false, err.Error()
		}
		block, _ := pem.Decode(pemBytes)
		if block == nil {
			return false, "no PEM block in " + certs.CertFile
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return false, err.Error()
		}
		line := regexp.MustCompile(`(?m)^shadowgate_serving_certificate_expiry_timestamp_seconds (\S+)$`).FindStringSubmatch(metrics)
		if line == nil {
			return false, harness.GrepLines(metrics, "shadowgate_serving_certificate")
		}
		v, err := strconv.ParseFloat(line[1], 64)
		return err == nil && int64(v) == cert.NotAfter.Unix(), fmt.Sprintf("%s, the served certificate's notAfter is %d", line[0], cert.NotAfter.Unix())
	})
}

// The kustomize components of the monitoring bundle build on the base: a ServiceMonitor that
// selects the Service, the PrometheusRule and the dashboard's ConfigMap; with
// monitoring-podmonitor, a PodMonitor that selects the webhook's pods and no ServiceMonitor.
func TestTheMonitoringComponentsBuild(t *testing.T) {
	objs := parseRendered(t, kustomizeWith(t, "manifests/components/monitoring"))
	for _, key := range []string{"ServiceMonitor/shadowgate", "PrometheusRule/shadowgate", "ConfigMap/shadowgate-dashboard"} {
		if _, ok := objs[key]; !ok {
			t.Errorf("the monitoring component renders no %s", key)
		}
	}
	dashboard, err := os.ReadFile(filepath.Join(cluster.root, "manifests/components/monitoring/shadowgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm, ok := objs["ConfigMap/shadowgate-dashboard"]; ok {
		data, _, _ := unstructured.NestedString(cm.Object, "data", "shadowgate.json")
		if data != string(dashboard) || cm.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("the dashboard ConfigMap, labelled %v, does not hold shadowgate.json labelled grafana_dashboard=1", cm.GetLabels())
		}
	}
	selects := func(monitor, kind, key string, objLabels map[string]string) {
		t.Helper()
		m, ok := objs[monitor]
		if !ok {
			t.Errorf("no %s", monitor)
			return
		}
		sel := labels.SelectorFromSet(labelsAt(t, m.Object, "spec", "selector", "matchLabels"))
		if !sel.Matches(labels.Set(objLabels)) {
			t.Errorf("%s selects %s, which %s %s, labelled %v, does not match", monitor, sel, kind, key, objLabels)
		}
	}
	selects("ServiceMonitor/shadowgate", "Service", "shadowgate", objs["Service/shadowgate"].GetLabels())

	objs = parseRendered(t, kustomizeWith(t, "manifests/components/monitoring", "manifests/components/monitoring-podmonitor"))
	if _, ok := objs["ServiceMonitor/shadowgate"]; ok {
		t.Error("with monitoring-podmonitor the ServiceMonitor is still rendered: each replica would be scraped twice")
	}
	template := labelsAt(t, objs["Deployment/shadowgate"].Object, "spec", "template", "metadata", "labels")
	selects("PodMonitor/shadowgate", "the pod template of Deployment", "shadowgate", template)
}

// labelsAt is the string map at path in obj.
func labelsAt(t *testing.T, obj map[string]any, path ...string) map[string]string {
	t.Helper()
	m, ok, err := unstructured.NestedStringMap(obj, path...)
	if err != nil || !ok {
		t.Fatalf("no labels at %v: %v", path, err)
	}
	return m
}
