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

// settledQueues are the controllers whose queues must be empty for a batch to be settled: the
// reconciler, which starts held shadows, and the credential follower. The tunnel reporter's
// is not: it looks at every tunnel still waiting for its node every 10 s (tunnelResync), which
// in a bench that keeps its pods is never over, and asks the API server nothing when nothing
// changed.
var settledQueues = []string{"shadows", "credential-copies"}

// snapshot is one reading of the counters, and how many items settledQueues hold.
type snapshot struct {
	counts requestCounts
	queued float64
}

// scrapeRequests reads the API server's request counters, and shadowgate's reconciles and
// queues from sgMetrics when it is not nil.
func scrapeRequests(ctx context.Context, cs kubernetes.Interface, sgMetrics func() (string, error)) (snapshot, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return snapshot{}, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	families, err := parseMetricsText(string(raw))
	if err != nil {
		return snapshot{}, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	s := snapshot{counts: requestCounts{}}
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
			s.counts[key] += m.GetCounter().GetValue()
		}
	}
	if f := families["apiserver_admission_webhook_admission_duration_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			s.counts["webhook "+labels(m)["name"]] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	if sgMetrics == nil {
		return s, nil
	}
	text, err := sgMetrics()
	if err != nil {
		return snapshot{}, fmt.Errorf("reading shadowgate's metrics: %w", err)
	}
	sg, err := parseMetricsText(text)
	if err != nil {
		return snapshot{}, fmt.Errorf("parsing shadowgate's metrics: %w", err)
	}
	if f := sg["controller_runtime_reconcile_total"]; f != nil {
		for _, m := range f.GetMetric() {
			s.counts["reconcile "+labels(m)["controller"]] += m.GetCounter().GetValue()
		}
	}
	if f := sg["workqueue_depth"]; f != nil {
		for _, m := range f.GetMetric() {
			if slices.Contains(settledQueues, labels(m)["name"]) {
				s.queued += m.GetGauge().GetValue()
			}
		}
	}
	return s, nil
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

// served says whether c counts a request to the API server or a webhook call; reconciles do
// not count (settledQueues says why).
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

// settle reads scrape every quiet until the API server served nothing (served) since the last
// reading and settledQueues are empty, so that what a batch set in motion after its creates
// returned (shadowgate starting a held shadow, writing its Tunnel) is counted with that batch
// and not the next. It returns that last reading and how many readings it took (each costs
// the processes CPU, which the caller takes off: scrapeCost); it gives up after limit.
func settle(ctx context.Context, scrape func(context.Context) (snapshot, error), quiet, limit time.Duration) (requestCounts, int, error) {
	last, err := scrape(ctx)
	if err != nil {
		return nil, 0, err
	}
	readings := 1
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, readings, ctx.Err()
		case <-time.After(quiet):
		}
		now, err := scrape(ctx)
		if err != nil {
			return nil, readings, err
		}
		readings++
		if !now.counts.minus(last.counts).served() && now.queued == 0 {
			return now.counts, readings, nil
		}
		last = now
	}
	return nil, readings, fmt.Errorf("the API server still served requests for the batch's pods, or shadowgate still had work queued, %s after its creates returned", limit)
}

// scrapeCost reads scrape costReadings times and returns the last reading and what one reading
// cost each process of cpu on average, to be taken off a batch once for each reading settle
// took. It is measured before the batch, on a machine that is not busy with it: a reading
// during the batch would also count the batch's own work. Several readings, as /proc counts
// CPU in 10 ms ticks.
func scrapeCost(ctx context.Context, scrape func(context.Context) (snapshot, error), cpu func() ([]time.Duration, error)) (snapshot, []time.Duration, error) {
	before, err := cpu()
	if err != nil {
		return snapshot{}, nil, err
	}
	var s snapshot
	for range costReadings {
		if s, err = scrape(ctx); err != nil {
			return snapshot{}, nil, err
		}
	}
	after, err := cpu()
	if err != nil {
		return snapshot{}, nil, err
	}
	for i := range after {
		after[i] = (after[i] - before[i]) / costReadings
	}
	return s, after, nil
}

const costReadings = 4
