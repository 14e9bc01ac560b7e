// Command bench is `make bench`: shadowgate measured in one run, printing one line per figure
// (`BENCH <name> <value> <unit>`) and a summary of the targets. In order: the Go benchmarks of
// the in-process path, interleaved, beside a baseline's code (regress.go); the tunnels' data
// path (the shadow's scripts and relay against plain ssh, tunnel.go); `shadowgate serve` over
// HTTPS, driven by the load generator here; pod creates through a real kube-apiserver and etcd
// (e2e/harness) with no webhook, with shadowgate and pods without shadows, with shadows, and
// the VK's way, interleaved, with the requests each costs (requests.go); what each kind of
// those requests costs (requestcost.go); and a burst of pods created at once, each checked for
// its shadow. Wall-clock figures depend on
// what else the machine runs: the load average is printed with them, and ratios, allocation
// counts and per-core figures (requests per CPU-second) depend on it far less.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

type options struct {
	root, shadowgate, baseline     string
	goRounds                       int
	goBenchtime                    time.Duration
	tunnelRounds                   int
	httpsRounds, httpsRate         int
	httpsWorkers                   int
	httpsDuration                  time.Duration
	apiRounds                      int
	burst, burstClients            int
	requests                       int
	podsPer1, podsPer10, podsPer50 int
	phases                         map[string]bool
}

func main() {
	var o options
	flag.StringVar(&o.root, "root", ".", "the shadowgate repository")
	flag.StringVar(&o.shadowgate, "shadowgate", "", "a shadowgate binary to measure instead of one built from -root (another version, for a before and after)")
	flag.StringVar(&o.baseline, "baseline", "", "a git revision of -root whose in-process benchmarks run beside this code's, each judged against them beyond the run's noise (none: not compared)")
	flag.IntVar(&o.goRounds, "go-rounds", 3, "rounds of the Go benchmarks")
	flag.DurationVar(&o.goBenchtime, "go-benchtime", time.Second, "-test.benchtime of each Go benchmark in each round")
	flag.IntVar(&o.tunnelRounds, "tunnel-rounds", 2, "interleaved rounds of each tunnel benchmark and its baseline")
	flag.IntVar(&o.httpsRounds, "https-rounds", 2, "rounds of each HTTPS measurement")
	flag.IntVar(&o.httpsRate, "https-rate", 1000, "fixed offered load for the HTTPS latencies, requests per second")
	flag.IntVar(&o.httpsWorkers, "https-workers", 8, "concurrent connections of the HTTPS throughput runs")
	flag.DurationVar(&o.httpsDuration, "https-duration", 3*time.Second, "length of each HTTPS run")
	flag.IntVar(&o.apiRounds, "api-rounds", 3, "rounds of pod creates through the API server")
	flag.IntVar(&o.podsPer1, "pods-1", 30, "pods per batch with 1 client")
	flag.IntVar(&o.podsPer10, "pods-10", 100, "pods per batch with 10 clients")
	flag.IntVar(&o.podsPer50, "pods-50", 200, "pods per batch with 50 clients")
	flag.IntVar(&o.requests, "requests", 300, "requests of each kind the requests phase makes")
	flag.IntVar(&o.burst, "burst", 1000, "pods with shadows created at once at the end")
	flag.IntVar(&o.burstClients, "burst-clients", 50, "concurrent clients creating the burst")
	phases := flag.String("phases", "go,tunnel,https,apiserver,requests,burst", "what to measure, comma-separated")
	flag.Parse()
	// The controller-runtime client the VK's way writes with logs only warnings (a deprecated
	// API, say): to stderr, beside the bench's own lines.
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	o.phases = map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		o.phases[p] = true
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	r := bench.NewReport(os.Stdout)
	r.Note("%s, %s; load average at start %s", bench.Machine(), runtime.Version(), bench.LoadAverage())
	dir, err := os.MkdirTemp("", "shadowgate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	if o.phases["go"] {
		r.Note("in-process: Go benchmarks, %d interleaved rounds of %s each, beside the baseline %q", o.goRounds, o.goBenchtime, o.baseline)
		if err := runGoBenchmarks(ctx, root, dir, o.baseline, o.goRounds, o.goBenchtime, r); err != nil {
			return err
		}
	}
	if o.phases["tunnel"] {
		r.Note("tunnels: the shadow's scripts and relay against plain ssh, real OpenSSH on loopback, %d interleaved rounds; load average %s", o.tunnelRounds, bench.LoadAverage())
		if err := runTunnelBenchmarks(ctx, root, dir, o.tunnelRounds, r); err != nil {
			return fmt.Errorf("tunnels: %w", err)
		}
	}
	if !o.phases["https"] && !o.phases["apiserver"] && !o.phases["requests"] && !o.phases["burst"] {
		r.Summary(started)
		return nil
	}

	tools, err := harness.BuildTools(root, os.Stderr)
	if err != nil {
		return err
	}
	bin := o.shadowgate
	if bin == "" {
		if bin, err = harness.BuildShadowgate(root, dir); err != nil {
			return err
		}
	}
	cp, err := harness.StartControlPlane(tools, dir)
	if err != nil {
		return err
	}
	defer stopLogged("the control plane", cp.Stop)
	kubectl := harness.Kubectl{Path: tools.Kubectl, Kubeconfig: cp.AdminKubeconfig}
	// The clients create in one namespace at once, as many as serve's default share of
	// unconfirmed shadows (50): a pod stored but not yet seen by serve's cache would make the
	// next one a 429. That share bounds made-up reviews (docs/security.md); it is no cost, so
	// the bench gives it room over its own concurrency.
	share := 2 * max(o.burstClients, 50)
	sg, err := harness.Install(ctx, root, kubectl, cp, harness.ServeOptions{Bin: bin, Dir: dir, GracePeriod: 2 * time.Minute,
		Args: []string{"--max-unconfirmed-shadows-per-namespace=" + strconv.Itoa(share), "--max-unconfirmed-shadows=" + strconv.Itoa(2*share)}})
	if err != nil {
		return err
	}
	defer stopLogged("shadowgate serve", sg.Stop)

	if o.phases["https"] {
		r.Note("HTTPS: shadowgate serve, %d connections closed-loop, then %d requests/s offered; %d rounds of %s; load average %s",
			o.httpsWorkers, o.httpsRate, o.httpsRounds, o.httpsDuration, bench.LoadAverage())
		https := newHTTPSLoad(sg.Port, sg.CA, sg.PID(), 64)
		if err := runHTTPS(ctx, https, sg, r, o.httpsRounds, o.httpsRate, o.httpsWorkers, o.httpsDuration); err != nil {
			return fmt.Errorf("HTTPS: %w", err)
		}
	}

	cfg := rest.CopyConfig(cp.Admin)
	cfg.QPS = -1 // no client-side limit: the clients are the load
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	apiserverPID, etcdPID := cp.PIDs()
	vk, err := newVKWay(root, cfg)
	if err != nil {
		return err
	}
	load := &apiServerLoad{cs: cs, sg: sg, vk: vk, namespace: "bench", pids: []int{apiserverPID, etcdPID, sg.PID()},
		processes: []string{"apiserver", "etcd", "shadowgate"}, hooked: true, last: map[string]string{}}
	if o.phases["apiserver"] {
		r.Note("API server: pod creates, %d interleaved rounds; CPU per pod is kube-apiserver + etcd + shadowgate; load average %s", o.apiRounds, bench.LoadAverage())
		podsPer := map[int]int{1: o.podsPer1, 10: o.podsPer10, 50: o.podsPer50}
		if err := runAPIServer(ctx, load, r, []int{1, 10, 50}, podsPer, o.apiRounds); err != nil {
			return fmt.Errorf("API server: %w", err)
		}
	}
	if o.phases["requests"] {
		r.Note("requests: the API server's and etcd's CPU per request of each kind a pod with a shadow costs, %d each, 10 clients; load average %s", o.requests, bench.LoadAverage())
		if err := requestCosts(ctx, load, cfg, r, o.requests, 10); err != nil {
			return fmt.Errorf("requests: %w", err)
		}
	}
	if o.phases["burst"] {
		r.Note("burst: %d pods with shadows, %d clients at once; load average %s", o.burst, o.burstClients, bench.LoadAverage())
		if err := runBurst(ctx, load, r, o.burst, o.burstClients); err != nil {
			return fmt.Errorf("burst: %w", err)
		}
	}
	r.Summary(started)
	return nil
}

func stopLogged(what string, stop func() error) {
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: stopping %s: %v\n", what, err)
	}
}
