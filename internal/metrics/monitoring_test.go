package metrics_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/serving"
)

// The monitoring bundle: the kustomize component, and the chart's templates that render the
// same objects from their values.
const (
	component = "../../manifests/components/monitoring"
	chartDir  = "../../manifests/chart/shadowgate"
)

// apiServerMetrics are the API server's metrics the bundle reads (k8s.io/apiserver's
// pkg/admission/metrics, under apiserver_admission_), with their labels.
var apiServerMetrics = map[string][]string{
	"apiserver_admission_webhook_request_total":              {"name", "type", "operation", "code", "rejected"},
	"apiserver_admission_webhook_rejection_count":            {"name", "type", "operation", "error_type", "rejection_code"},
	"apiserver_admission_webhook_fail_open_count":            {"name", "type"},
	"apiserver_admission_webhook_admission_duration_seconds": {"name", "type", "operation", "rejected"},
}

// targetLabels are the labels Prometheus adds to every series it scrapes from a replica.
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

// The alerts fire as docs/monitoring.md says, each after its `for` and only on what it is for
// (testdata/alerts.test.yaml), as promtool, Prometheus's own rule tester, evaluates them.
func TestTheAlertsFireAsDesigned(t *testing.T) {
	promtool := buildTool(t, "build-promtool.sh", "promtool")
	dir := t.TempDir()
	writeRules(t, filepath.Join(dir, "rules.yaml"), componentRule(t))
	test, err := os.ReadFile("testdata/alerts.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), test, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, promtool, "check", "rules", "rules.yaml")
	out := run(t, dir, promtool, "test", "rules", "alerts.test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules did not say SUCCESS:\n%s", out)
	}
	// Every alert has a test that expects it to fire.
	for _, alert := range alertNames(t, componentRule(t)) {
		if !regexp.MustCompile(`(?m)^    alertname: ` + alert + `\n    exp_alerts:\n    - `).Match(test) {
			t.Errorf("testdata/alerts.test.yaml has no test in which %s fires", alert)
		}
	}
}

// The chart, with its default values, renders the kustomize component's objects: the very
// rules, the same scrape endpoints and the same dashboard. Every value of monitoring reaches
// what it is documented to change, and the rules it renders with other values still pass
// promtool check rules.
func TestTheChartRendersTheComponentsMonitoring(t *testing.T) {
	dashboard, err := os.ReadFile(filepath.Join(component, "shadowgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	if chartCopy, err := os.ReadFile(filepath.Join(chartDir, "dashboards/shadowgate.json")); err != nil || !bytes.Equal(chartCopy, dashboard) {
		t.Errorf("the chart's dashboards/shadowgate.json is not the component's shadowgate.json (%v): copy it over", err)
	}

	if got := helmTemplate(t); strings.Contains(got, "monitoring.coreos.com") || strings.Contains(got, "-dashboard") {
		t.Errorf("the chart renders monitoring objects with monitoring.enabled false:\n%s", got)
	}

	objs := renderedObjects(t, helmTemplate(t, "--set", "monitoring.enabled=true"))
	if d := cmp.Diff(componentRule(t)["spec"], objs["PrometheusRule/shadowgate"]["spec"]); d != "" {
		t.Errorf("the chart's PrometheusRule is not the component's (-component +chart):\n%s", d)
	}
	sm := readObject(t, filepath.Join(component, "servicemonitor.yaml"))
	if d := cmp.Diff(sm["spec"].(map[string]any)["endpoints"], field(objs["ServiceMonitor/shadowgate"], "spec", "endpoints")); d != "" {
		t.Errorf("the chart's ServiceMonitor endpoints are not the component's (-component +chart):\n%s", d)
	}
	if _, ok := objs["PodMonitor/shadowgate"]; ok {
		t.Error("the chart renders a PodMonitor by default")
	}
	if got := field(objs["ConfigMap/shadowgate-dashboard"], "data", "shadowgate.json"); got != strings.TrimSuffix(string(dashboard), "\n") {
		t.Errorf("the chart's dashboard ConfigMap does not hold shadowgate.json")
	}
	if got := field(objs["ConfigMap/shadowgate-dashboard"], "metadata", "labels", "grafana_dashboard"); got != "1" {
		t.Errorf("the dashboard ConfigMap is labelled grafana_dashboard=%v, want 1", got)
	}
	selected := field(objs["ServiceMonitor/shadowgate"], "spec", "selector", "matchLabels").(map[string]any)
	svcLabels := field(objs["Service/shadowgate"], "metadata", "labels").(map[string]any)
	for k, v := range selected {
		if svcLabels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%v, which the chart's Service is not labelled with (%v)", k, v, svcLabels)
		}
	}

	// Every value, set to something else, changes what it says.
	objs = renderedObjects(t, helmTemplate(t, "--set", "monitoring.enabled=true",
		"--set", "monitoring.labels.release=prom", "--set", "monitoring.interval=1m",
		"--set", "monitoring.serviceMonitor=false", "--set", "monitoring.podMonitor=true",
		"--set", "monitoring.dashboardLabels.dash=yes",
		"--set", "monitoring.alerts.runbookBase=https://runbooks.example.org/sg",
		"--set", "monitoring.alerts.webhookUnreachable.for=2m", "--set", "monitoring.alerts.webhookUnreachable.severity=page",
		"--set", "monitoring.alerts.webhookFailingOpen.for=3m", "--set", "monitoring.alerts.webhookFailingOpen.severity=ticket",
		"--set-json", "monitoring.alerts.webhookRejecting.ratio=0.25", "--set", "monitoring.alerts.webhookRejecting.for=4m", "--set", "monitoring.alerts.webhookRejecting.severity=s4",
		"--set-json", "monitoring.alerts.webhookLatencyHigh.seconds=1.5", "--set", "monitoring.alerts.webhookLatencyHigh.for=6m", "--set", "monitoring.alerts.webhookLatencyHigh.severity=s6",
		"--set", "monitoring.alerts.policyStuckOnLastValid.for=7m", "--set", "monitoring.alerts.policyStuckOnLastValid.severity=info",
		"--set", "monitoring.alerts.tunnelsFailed.count=3", "--set", "monitoring.alerts.tunnelsFailed.for=8m", "--set", "monitoring.alerts.tunnelsFailed.severity=s8",
		"--set", "monitoring.alerts.certificateExpiringSoon.days=30", "--set", "monitoring.alerts.certificateExpiringSoon.for=9m", "--set", "monitoring.alerts.certificateExpiringSoon.severity=s9",
		"--set", "monitoring.alerts.shadowsStuckOutOfDate.stalledFor=2h", "--set", "monitoring.alerts.shadowsStuckOutOfDate.for=3h", "--set", "monitoring.alerts.shadowsStuckOutOfDate.severity=s10"))
	if _, ok := objs["ServiceMonitor/shadowgate"]; ok {
		t.Error("monitoring.serviceMonitor=false still renders the ServiceMonitor")
	}
	for _, key := range []string{"PodMonitor/shadowgate", "PrometheusRule/shadowgate"} {
		if got := field(objs[key], "metadata", "labels", "release"); got != "prom" {
			t.Errorf("%s is labelled release=%v, want monitoring.labels' prom", key, got)
		}
	}
	if got := field(objs["PodMonitor/shadowgate"], "spec", "podMetricsEndpoints"); !cmp.Equal(got, []any{map[string]any{"port": "metrics", "interval": "1m"}}) {
		t.Errorf("the PodMonitor's endpoints are %v, want port metrics every 1m", got)
	}
	if got := field(objs["ConfigMap/shadowgate-dashboard"], "metadata", "labels", "dash"); got != "yes" {
		t.Errorf("the dashboard ConfigMap is labelled dash=%v, want monitoring.dashboardLabels' yes", got)
	}
	rules := map[string]map[string]any{}
	for _, r := range field(objs["PrometheusRule/shadowgate"], "spec", "groups").([]any)[0].(map[string]any)["rules"].([]any) {
		r := r.(map[string]any)
		rules[r["alert"].(string)] = r
	}
	for alert, want := range map[string]struct{ for_, severity, expr string }{
		"ShadowgateWebhookUnreachable":      {"2m", "page", "> 0"},
		"ShadowgateWebhookFailingOpen":      {"3m", "ticket", "> 0"},
		"ShadowgateWebhookRejecting":        {"4m", "s4", "> 0.25"},
		"ShadowgateWebhookLatencyHigh":      {"6m", "s6", "> 1.5"},
		"ShadowgatePolicyStuckOnLastValid":  {"7m", "info", "== 0"},
		"ShadowgateTunnelsFailed":           {"8m", "s8", "> 3"},
		"ShadowgateCertificateExpiringSoon": {"9m", "s9", "< 30 * 86400"},
		"ShadowgateShadowsStuckOutOfDate":   {"3h", "s10", "[2h])) > 0"},
	} {
		r := rules[alert]
		if r == nil {
			t.Errorf("the chart renders no alert %s", alert)
			continue
		}
		if r["for"] != want.for_ || field(r, "labels", "severity") != want.severity || !strings.HasSuffix(r["expr"].(string), want.expr) {
			t.Errorf("%s: for %v, severity %v, expr %q; want for %s, severity %s, an expr ending %q", alert, r["for"], field(r, "labels", "severity"), r["expr"], want.for_, want.severity, want.expr)
		}
		if got, want := field(r, "annotations", "runbook_url"), "https://runbooks.example.org/sg#"+strings.ToLower(alert); got != want {
			t.Errorf("%s: runbook_url %v, want %s", alert, got, want)
		}
	}
	dir := t.TempDir()
	writeRules(t, filepath.Join(dir, "rules.yaml"), objs["PrometheusRule/shadowgate"])
	run(t, dir, buildTool(t, "build-promtool.sh", "promtool"), "check", "rules", "rules.yaml")

	if got := helmTemplate(t, "--set", "monitoring.enabled=true", "--set", "monitoring.alerts.enabled=false", "--set", "monitoring.dashboard=false"); strings.Contains(got, "kind: PrometheusRule") || strings.Contains(got, "-dashboard") {
		t.Errorf("monitoring.alerts.enabled=false and monitoring.dashboard=false still render the PrometheusRule or the dashboard")
	}
	for _, args := range [][]string{nil, {"--set", "monitoring.enabled=true", "--set", "monitoring.podMonitor=true"}} {
		out, err := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...)
		if err != nil || !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("helm lint --strict %v: %v\n%s", args, err, out)
		}
	}
}

// values.schema.json refuses what would render a rule Prometheus refuses, or an alert that
// can never fire, naming the value.
func TestTheChartRefusesBadMonitoringValues(t *testing.T) {
	for set, want := range map[string]string{
		"monitoring.interval=30 seconds":                       "/monitoring/interval",
		"monitoring.alerts.webhookRejecting.ratio=2":           "/monitoring/alerts/webhookRejecting/ratio",
		"monitoring.alerts.webhookLatencyHigh.seconds=0":       "/monitoring/alerts/webhookLatencyHigh/seconds",
		"monitoring.alerts.tunnelsFailed.count=-1":             "/monitoring/alerts/tunnelsFailed/count",
		"monitoring.alerts.certificateExpiringSoon.for=1 hour": "/monitoring/alerts/certificateExpiringSoon/for",
		"monitoring.alerts.shadowsStuckOutOfDate.stalledFor=x": "/monitoring/alerts/shadowsStuckOutOfDate/stalledFor",
		"monitoring.alerts.webhookUnreachable.severity=a b":    "/monitoring/alerts/webhookUnreachable/severity",
		"monitoring.alerts.runbookBase=docs/monitoring.md":     "/monitoring/alerts/runbookBase",
		"monitoring.alerts.policyStuck.for=1m":                 "additional properties 'policyStuck' not allowed",
		"monitoring.grafana=true":                              "additional properties 'grafana' not allowed",
		"monitoring.alerts.tunnelsFailed.threshold=3":          "additional properties 'threshold' not allowed",
	} {
		_, err := helm(t, "template", "shadowgate", chartDir, "--set", set)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s: got %v, want an error naming %s", set, err, want)
		}
	}
	_, err := helm(t, "template", "shadowgate", chartDir, "--set", "monitoring.enabled=true", "--set", "metrics.enabled=false")
	if err == nil || !strings.Contains(err.Error(), "monitoring.enabled needs metrics.enabled") {
		t.Errorf("monitoring without metrics: got %v, want a refusal naming metrics.enabled", err)
	}
}

// Every metric the alerts and the dashboard query is one shadowgate registers, or one of the
// API server's listed above, and every label they select or group by is one it has (or one
// Prometheus adds to what it scrapes).
func TestTheBundleQueriesOnlyExportedMetrics(t *testing.T) {
	exported := registered(t)
	for name, labels := range apiServerMetrics {
		exported[name] = labels
	}
	var exprs []string
	for _, r := range rulesOf(componentRule(t)) {
		exprs = append(exprs, r["expr"].(string))
	}
	raw, err := os.ReadFile(filepath.Join(component, "shadowgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatal(err)
	}
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	if len(exprs) < 20 {
		t.Fatalf("found only %d queries in the rules and the dashboard", len(exprs))
	}
	used := map[string]bool{}
	for _, expr := range exprs {
		for _, s := range selectors(expr) {
			labels, ok := exported[s.metric]
			if !ok {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, cut := strings.CutSuffix(s.metric, suffix); cut && exported[base] != nil {
						labels, ok = append(slices.Clone(exported[base]), "le"), true
					}
				}
			}
			if !ok {
				t.Errorf("%q queries %s, which shadowgate does not register and is not an API server metric listed here", expr, s.metric)
				continue
			}
			used[strings.TrimSuffix(s.metric, "_bucket")] = true
			for _, l := range s.labels {
				if !slices.Contains(labels, l) && !slices.Contains(targetLabels, l) {
					t.Errorf("%q selects or groups %s by label %s, which it does not have (%v)", expr, s.metric, l, labels)
				}
			}
		}
	}
	for _, name := range []string{"shadowgate_tunnels", "shadowgate_tunnel_transitions_total", "shadowgate_tunnel_ready_seconds", "shadowgate_build_info", "shadowgate_policy_stored_in_force", "shadowgate_serving_certificate_expiry_timestamp_seconds"} {
		if !used[name] {
			t.Errorf("neither the dashboard nor an alert shows %s", name)
		}
	}
}

// registered is every metric shadowgate's serve registers, by name, with its labels.
func registered(t *testing.T) map[string][]string {
	t.Helper()
	reg := &recordingRegistry{Registry: prometheus.NewRegistry()}
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := serving.NewDecisions(reg); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(metrics.BuildInfo("v0.0.0", "unknown"), metrics.ServingCertificate(func() (time.Time, bool) { return time.Now(), true }))
	descs := make(chan *prometheus.Desc, 100)
	for _, c := range reg.collectors {
		c.Describe(descs)
	}
	close(descs)
	// A Desc says its name and labels only in its String: Desc{fqName: "x", help: "...",
	// constLabels: {a="b"}, variableLabels: {c,d}}.
	shape := regexp.MustCompile(`^Desc\{fqName: "([a-z_:]+)", help: ".*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)
	out := map[string][]string{}
	for d := range descs {
		m := shape.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		var labels []string
		for _, kv := range strings.Split(m[2], ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				labels = append(labels, k)
			}
		}
		for _, l := range strings.Split(m[3], ",") {
			if l != "" {
				labels = append(labels, l)
			}
		}
		out[m[1]] = labels
	}
	if len(out) < 12 {
		t.Fatalf("read only %d metrics: %v", len(out), out)
	}
	return out
}

// recordingRegistry keeps what is registered with it.
type recordingRegistry struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recordingRegistry) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recordingRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// selector is a metric a query reads, with the labels it matches on or aggregates by.
type selector struct {
	metric string
	labels []string
}

var (
	quoted      = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers    = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	grouping    = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	identifiers = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	matcherName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*$`)
	durations   = regexp.MustCompile(`\[[0-9a-z]+\]`)
	keywords    = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
)

// selectors reads a PromQL expression for the metrics it selects: every name that is not a
// function, keyword or label, with the labels of its matchers. Labels named in a by, on or
// without clause are checked against every metric of the expression.
func selectors(expr string) []selector {
	var grouped []string
	for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			grouped = append(grouped, strings.TrimSpace(l))
		}
	}
	stripped := grouping.ReplaceAllString(expr, "")
	var out []selector
	// Matchers first: label names and quoted values are no metric names.
	withoutStrings := quoted.ReplaceAllStringFunc(stripped, func(string) string { return `""` })
	withoutStrings = matchers.ReplaceAllStringFunc(withoutStrings, func(s string) string {
		m := matchers.FindStringSubmatch(s)
		sel := selector{metric: m[1], labels: slices.Clone(grouped)}
		for _, part := range strings.Split(m[2], ",") {
			if n := matcherName.FindStringSubmatch(strings.TrimSuffix(strings.TrimSpace(part), `""`)); n != nil {
				sel.labels = append(sel.labels, n[1])
			}
		}
		out = append(out, sel)
		return " "
	})
	withoutStrings = durations.ReplaceAllString(withoutStrings, " ")
	for _, m := range identifiers.FindAllStringSubmatch(withoutStrings, -1) {
		name := strings.TrimSpace(m[0])
		if m[1] != "" || slices.Contains(keywords, name) {
			continue // a function or a keyword
		}
		out = append(out, selector{metric: name, labels: slices.Clone(grouped)})
	}
	return out
}

// componentRule is the component's PrometheusRule.
func componentRule(t *testing.T) map[string]any {
	t.Helper()
	return readObject(t, filepath.Join(component, "prometheusrule.yaml"))
}

// rulesOf is the rules of a PrometheusRule's groups.
func rulesOf(rule map[string]any) []map[string]any {
	var out []map[string]any
	for _, g := range field(rule, "spec", "groups").([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			out = append(out, r.(map[string]any))
		}
	}
	return out
}

// alertNames is the alerts of a PrometheusRule.
func alertNames(t *testing.T, rule map[string]any) []string {
	t.Helper()
	var out []string
	for _, r := range rulesOf(rule) {
		out = append(out, r["alert"].(string))
	}
	if len(out) == 0 {
		t.Fatal("the PrometheusRule has no alert")
	}
	return out
}

// writeRules writes a PrometheusRule's spec as the rule file Prometheus loads.
func writeRules(t *testing.T, path string, rule map[string]any) {
	t.Helper()
	b, err := yaml.Marshal(rule["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readObject(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var o map[string]any
	if err := yaml.Unmarshal(b, &o); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return o
}

// field is the value at path in o, nil when there is none.
func field(o map[string]any, path ...string) any {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// renderedObjects are the objects of a multi-document YAML, by Kind/name.
func renderedObjects(t *testing.T, docs string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(docs, "\n---") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		if o != nil {
			out[fmt.Sprint(o["kind"])+"/"+fmt.Sprint(field(o, "metadata", "name"))] = o
		}
	}
	return out
}

// helmTemplate renders the chart as `helm install shadowgate -n shadowgate-system` would.
func helmTemplate(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helm(t, append([]string{"template", "shadowgate", chartDir, "--namespace", "shadowgate-system"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// helm runs the helm hack/build-helm.sh builds; the error carries what it printed.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(buildTool(t, "build-helm.sh", "helm"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), err
}

// run runs a command in dir and fails the test when it fails.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

var tools sync.Map // script -> the path it printed

// buildTool runs hack/SCRIPT, which builds a tool into bin/ unless it is there (a few minutes
// the first time: make test builds them first), and returns the path it prints as NAME=PATH.
// A tool that cannot be built fails the test, naming the script.
func buildTool(t *testing.T, script, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs " + name + ", which hack/" + script + " builds (minutes on a fresh machine); make test runs it")
	}
	if p, ok := tools.Load(script); ok {
		return p.(string)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", script))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("these tests need %s, which hack/%s builds into bin/, and it failed: %v\n%s", name, script, err, stderr.String())
	}
	for _, line := range strings.Split(string(out), "\n") {
		if p, ok := strings.CutPrefix(line, name+"="); ok {
			tools.Store(script, p)
			return p
		}
	}
	t.Fatalf("hack/%s printed no %s=PATH: %s", script, name, out)
	return ""
}
