package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// scenario is one way of creating pods through the API server.
type scenario struct {
	name     string
	webhooks bool // shadowgate's webhook configurations registered
	port     bool // the pod has a port, so it gets a shadow
	vk       bool // the client creates the shadow itself (vkWay), as the virtual kubelet does
}

// The scenarios create the same offloaded pod, with a port for shadows: the API server's own
// work differs only by what shadowgate adds, or, for vk, by the same shadow written the VK's
// way. In this order the webhooks are registered once within a round, and removed once.
var scenarios = []scenario{
	{name: "vk", port: true, vk: true},
	{name: "baseline"},
	{name: "noshadow", webhooks: true},
	{name: "shadow", webhooks: true, port: true},
}

// apiServerLoad creates pods through the harness's API server as the cluster admin.
type apiServerLoad struct {
	cs        kubernetes.Interface
	sg        *harness.Shadowgate
	namespace string
	// The processes a pod create costs CPU in, by name: kube-apiserver, etcd, shadowgate.
	pids      []int
	processes []string
	hooked    bool
	created   int
	vk        *vkWay
	last      map[string]string // scenario name: the last pod it created
}

type batch struct {
	latencies []time.Duration
	wall      time.Duration
	cpu       []time.Duration // per process of pids
	pods      int
	requests  requestCounts // what the API server served for the batch, settled (settle)
}

// runAPIServer creates pods with each number of concurrent clients, for each scenario, in
// rounds: within a round the scenarios run one after the other, in alternating order, so the
// webhooks are registered or removed once between blocks, and drifting load touches every
// scenario alike. Latency percentiles pool the rounds; ratios are to the baseline's.
func runAPIServer(ctx context.Context, l *apiServerLoad, r *bench.Report, clients []int, podsPer map[int]int, rounds int) error {
	if _, err := l.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Warm up every path (connections, caches, and the shadow namespace the VK's way needs),
	// unrecorded.
	for _, s := range slices.Backward(scenarios) {
		if _, err := l.batch(ctx, s, 10, 20); err != nil {
			return fmt.Errorf("warming up %s: %w", s.name, err)
		}
	}
	got := map[string]*batch{}
	block := 0
	for range rounds {
		for _, n := range clients {
			order := scenarios
			if block%2 == 1 {
				order = slices.Clone(scenarios)
				slices.Reverse(order)
			}
			block++
			for _, s := range order {
				b, err := l.batch(ctx, s, n, podsPer[n])
				if err != nil {
					return fmt.Errorf("%s with %d clients: %w", s.name, n, err)
				}
				key := s.name + "-" + strconv.Itoa(n)
				if got[key] == nil {
					got[key] = &batch{requests: requestCounts{}}
				}
				t := got[key]
				t.latencies = append(t.latencies, b.latencies...)
				t.wall, t.pods = t.wall+b.wall, t.pods+b.pods
				if t.cpu == nil {
					t.cpu = make([]time.Duration, len(b.cpu))
				}
				for i := range b.cpu {
					t.cpu[i] += b.cpu[i]
				}
				t.requests.add(b.requests)
			}
		}
	}
	for _, n := range clients {
		base := got["baseline-"+strconv.Itoa(n)]
		base50, base99 := bench.Percentile(base.latencies, 50), bench.Percentile(base.latencies, 99)
		for _, s := range scenarios {
			t := got[s.name+"-"+strconv.Itoa(n)]
			name := fmt.Sprintf("apiserver-%s-%dclients", s.name, n)
			p50, p99 := bench.Percentile(t.latencies, 50), bench.Percentile(t.latencies, 99)
			r.Duration(name+"-p50", p50)
			r.Duration(name+"-p99", p99)
			r.Figure(name+"-throughput", float64(t.pods)/t.wall.Seconds(), "pods/s")
			for i, cpu := range t.cpu {
				r.Figure(name+"-cpu-per-pod-"+l.processes[i], perPod(cpu, t.pods), "ms")
			}
			r.Figure(name+"-cpu-per-pod", t.cpuPerPod(), "ms")
			r.Figure(name+"-requests-per-pod", t.requests.total()/float64(t.pods), "requests")
			if n == 10 {
				r.Note("%s, per pod: %s", name, t.requests.perPod(t.pods))
			}
			switch s.name {
			case "noshadow":
				r99 := ratio(p99, base99)
				r.Figure(name+"-p50-vs-baseline", ratio(p50, base50), "x")
				r.Figure(name+"-p99-vs-baseline", r99, "x")
				if n >= 10 {
					r.Target(fmt.Sprintf("no shadow, %d clients: p99 <= 1.3x baseline", n),
						fmt.Sprintf("%.2fx (p99 %s vs %s)", r99, p99.Round(100*time.Microsecond), base99.Round(100*time.Microsecond)), r99 <= 1.3)
				}
			case "shadow":
				r.Figure(name+"-p50-vs-baseline", ratio(p50, base50), "x")
				r.Figure(name+"-p99-vs-baseline", ratio(p99, base99), "x")
				vk := got["vk-"+strconv.Itoa(n)]
				cpu := t.cpuPerPod() / vk.cpuPerPod()
				r.Figure(name+"-cpu-vs-vk", cpu, "x")
				if n == 10 {
					r.Target("with shadows, 10 clients: CPU per pod <= 1.2x the VK's way",
						fmt.Sprintf("%.2fx (%.1f ms vs %.1f ms; %.1f vs %.1f requests)", cpu, t.cpuPerPod(), vk.cpuPerPod(),
							t.requests.total()/float64(t.pods), vk.requests.total()/float64(vk.pods)), cpu <= 1.2)
				}
			}
		}
	}
	for _, way := range []string{"shadow", "vk"} {
		sizes, err := l.vk.storedBytes(ctx, l.namespace, l.last[way])
		if err != nil {
			return fmt.Errorf("the stored size of %s: %w", l.last[way], err)
		}
		for _, kind := range slices.Sorted(maps.Keys(sizes)) {
			r.Figure(fmt.Sprintf("apiserver-%s-stored-%s", way, strings.ToLower(kind)), float64(sizes[kind]), "bytes")
		}
	}
	return nil
}

// cpuPerPod is the milliseconds of CPU the batch's processes spent per pod, all together.
func (b *batch) cpuPerPod() float64 {
	var total time.Duration
	for _, cpu := range b.cpu {
		total += cpu
	}
	return perPod(total, b.pods)
}

func perPod(cpu time.Duration, pods int) float64 {
	return float64(cpu) / float64(time.Millisecond) / float64(pods)
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// A batch is settled once the API server served nothing for its pods for settleQuiet, which is
// longer than shadowgate's reconcilers take to pick up a stored pod on this machine.
const (
	settleQuiet = time.Second
	settleLimit = time.Minute
)

// batch creates pods pods of scenario s with n concurrent clients, each creating its share
// one after the other, and returns every create's latency (for vk, a pod and its shadow's),
// and the CPU and requests they cost, counted once what they set in motion has settled.
func (l *apiServerLoad) batch(ctx context.Context, s scenario, n, pods int) (batch, error) {
	if err := l.hook(ctx, s.webhooks); err != nil {
		return batch{}, err
	}
	objs := make([]*corev1.Pod, pods)
	for i := range objs {
		objs[i] = bench.TypicalPod(fmt.Sprintf("%s-%d", s.name, l.created+i), l.namespace, s.port, false)
	}
	l.created += pods
	l.last[s.name] = objs[len(objs)-1].Name
	start, perReading, err := scrapeCost(ctx, l.counts, l.cpu)
	if err != nil {
		return batch{}, err
	}
	cpu0, err := l.cpu()
	if err != nil {
		return batch{}, err
	}
	create := func(i int) error {
		_, err := l.cs.CoreV1().Pods(objs[i].Namespace).Create(ctx, objs[i], metav1.CreateOptions{})
		return err
	}
	if s.vk {
		create = func(i int) error { return l.vk.create(ctx, objs[i]) }
	}
	latencies, wall, failed := bench.Concurrently(len(objs), n, create)
	if len(failed) > 0 {
		return batch{}, fmt.Errorf("%d of %d creates failed, the first: %w", len(failed), pods, failed[0])
	}
	end, readings, err := settle(ctx, l.counts, settleQuiet, settleLimit)
	if err != nil {
		return batch{}, fmt.Errorf("%s: %w", s.name, err)
	}
	cpu1, err := l.cpu()
	for i := range cpu1 {
		cpu1[i] -= cpu0[i] + time.Duration(readings)*perReading[i]
	}
	return batch{latencies: latencies, wall: wall, cpu: cpu1, pods: pods, requests: end.minus(start.counts)}, err
}

func (l *apiServerLoad) hook(ctx context.Context, on bool) error {
	if on == l.hooked {
		return nil
	}
	l.hooked = on
	if on {
		return l.sg.InstallWebhooks(ctx)
	}
	return l.sg.RemoveWebhooks(ctx)
}

// counts reads the API server's request counters and shadowgate's reconciles and queues.
func (l *apiServerLoad) counts(ctx context.Context) (snapshot, error) {
	return scrapeRequests(ctx, l.cs, l.sg.Metrics)
}

func (l *apiServerLoad) cpu() ([]time.Duration, error) {
	cpu := make([]time.Duration, len(l.pids))
	for i, pid := range l.pids {
		t, err := bench.ProcessCPU(pid)
		if err != nil {
			return nil, err
		}
		cpu[i] = t
	}
	return cpu, nil
}

// runBurst creates count pods with shadows, all at once with concurrency clients, then checks
// that every pod was created and has every object of its shadow.
func runBurst(ctx context.Context, l *apiServerLoad, r *bench.Report, count, concurrency int) error {
	if err := l.hook(ctx, true); err != nil {
		return err
	}
	ns := l.namespace + "-burst"
	if _, err := l.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	pods := make([]*corev1.Pod, count)
	for i := range pods {
		pods[i] = bench.TypicalPod("burst-"+strconv.Itoa(i), ns, true, false)
	}
	latencies, wall, failed := bench.CreatePods(ctx, l.cs, pods, concurrency)
	audit, err := harness.Audit(ctx, l.cs, ns)
	if err != nil {
		return err
	}
	missing := len(audit.Incomplete)
	name := fmt.Sprintf("apiserver-burst-%dpods-%dclients", count, concurrency)
	r.Figure(name+"-throughput", float64(count)/wall.Seconds(), "pods/s")
	r.Duration(name+"-p50", bench.Percentile(latencies, 50))
	r.Duration(name+"-p99", bench.Percentile(latencies, 99))
	r.Figure(name+"-errors", float64(len(failed)), "pods")
	r.Figure(name+"-missing-shadows", float64(missing), "pods")
	verdict := fmt.Sprintf("%d errors, %d pods without their whole shadow, in %s", len(failed), missing, wall.Round(100*time.Millisecond))
	if len(failed) > 0 {
		verdict += "; the first error: " + failed[0].Error()
	}
	r.Target(fmt.Sprintf("%d pods created concurrently: each has its shadow, no error", count), verdict, len(failed) == 0 && missing == 0)
	return nil
}
