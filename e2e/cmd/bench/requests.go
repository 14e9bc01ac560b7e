package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// requestCounts are the API server's requests by what they did: "<VERB> <resource>" (with
// "/<subresource>", and " dry-run" for a dry run), and "webhook <name>" for each admission
// webhook call, read from its own metrics (apiserver_request_total and
// apiserver_admission_webhook_admission_duration_seconds). Leases are left out: leader
// election renews them on its own clock, whatever the pods do. With shadowgate's metrics,
// also "reconcile <controller>", each of its controllers' reconciles
// (controller_runtime_reconcile_total).
type requestCounts map[string]float64

// notRequests are the prefixes of what total leaves out: what is not a request to the API server.
var notRequests = []string{"webhook ", "reconcile "}

// scrapeRequests reads the API server's request counters, and shadowgate's reconciles from
// sgMetrics when it is not nil.
func scrapeRequests(ctx context.Context, cs kubernetes.Interface, sgMetrics func() (string, error)) (requestCounts, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	families, err := parseMetricsText(string(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	counts := requestCounts{}
	if sgMetrics != nil {
		text, err := sgMetrics()
		if err != nil {
			return nil, fmt.Errorf("reading shadowgate's metrics: %w", err)
		}
		sg, err := parseMetricsText(text)
		if err != nil {
			return nil, fmt.Errorf("parsing shadowgate's metrics: %w", err)
		}
		if f := sg["controller_runtime_reconcile_total"]; f != nil {
			for _, m := range f.GetMetric() {
				counts["reconcile "+labels(m)["controller"]] += m.GetCounter().GetValue()
			}
		}
	}
	if f := families["apiserver_request_total"]; f != nil {
		for _, m := range f.GetMetric() {
			l := labels(m)
			if l["resource"] == "" || l["resource"] == "leases" {
				continue // /metrics, /healthz and discovery: the bench's own, not a pod's
			}
			key := l["verb"] + " " + l["resource"]
			if l["subresource"] != "" {
				key += "/" + l["subresource"]
			}
			if l["dry_run"] != "" {
				key += " dry-run"
			}
			counts[key] += m.GetCounter().GetValue()
		}
	}
	if f := families["apiserver_admission_webhook_admission_duration_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			counts["webhook "+labels(m)["name"]] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return counts, nil
}

func parseMetricsText(text string) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(text))
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// minus is c - o, without the kinds that did not change.
func (c requestCounts) minus(o requestCounts) requestCounts {
	d := requestCounts{}
	for k, v := range c {
		if n := v - o[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// add adds o to c.
func (c requestCounts) add(o requestCounts) {
	for k, v := range o {
		c[k] += v
	}
}

// total is the number of API requests, webhook calls and reconciles left out.
func (c requestCounts) total() float64 {
	var n float64
	for k, v := range c {
		if !slices.ContainsFunc(notRequests, func(prefix string) bool { return strings.HasPrefix(k, prefix) }) {
			n += v
		}
	}
	return n
}

// served says whether c counts a request to the API server or a webhook call. Reconciles do
// not count: the tunnel reporter looks at every tunnel still waiting for its node every 10 s
// (tunnelResync), which in a bench that keeps its pods is never quiet, and asks the API
// server nothing when nothing changed.
func (c requestCounts) served() bool {
	for k := range c {
		if !strings.HasPrefix(k, "reconcile ") {
			return true
		}
	}
	return false
}

// perPod describes c per pod, most frequent first: "1.00 POST pods, 1.00 webhook ...".
func (c requestCounts) perPod(pods int) string {
	keys := slices.SortedFunc(maps.Keys(c), func(a, b string) int {
		if c[a] != c[b] {
			if c[a] > c[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%.2f %s", c[k]/float64(pods), k)
	}
	return strings.Join(parts, ", ")
}

// settle waits until the API server has served no request (served) for quiet, so that what a
// batch set in motion after its creates returned (shadowgate starting a held shadow, writing
// its Tunnel) is counted with that batch and not the next. It gives up after limit and says so.
// The processes' CPU its own scrapes of the API server's metrics cost (cpu, read around each) is
// returned, for the batch not to count it.
func settle(ctx context.Context, scrapeCounts func(context.Context) (requestCounts, error), cpu func() ([]time.Duration, error), quiet, limit time.Duration) (requestCounts, []time.Duration, error) {
	var spent []time.Duration
	scrape := func() (requestCounts, error) {
		before, err := cpu()
		if err != nil {
			return nil, err
		}
		counts, err := scrapeCounts(ctx)
		if err != nil {
			return nil, err
		}
		after, err := cpu()
		if spent == nil {
			spent = make([]time.Duration, len(after))
		}
		for i := range after {
			spent[i] += after[i] - before[i]
		}
		return counts, err
	}
	last, err := scrape()
	if err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(quiet):
		}
		now, err := scrape()
		if err != nil {
			return nil, nil, err
		}
		if !now.minus(last).served() {
			return now, spent, nil
		}
		last = now
	}
	return nil, nil, fmt.Errorf("the API server still served requests for the batch's pods %s after its creates returned", limit)
}
