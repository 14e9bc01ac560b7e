package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/interlink-hq/shadowgate/e2e/bench"
)

// The tunnel benchmarks are Go benchmarks of the inject package (BenchmarkTunnel*): the
// shadow's scripts and relay as rendered, against real OpenSSH on loopback, each path beside
// its plain-ssh baseline in the same round. Each reports its medians over the rounds as
// metrics named "tunnel-<figure>" and "plain-<figure>"; exec mode also "session-<figure>", a
// session of the same master per connection running the connect command (OpenSSH's cost of
// the mode); the reverse tunnel also "hop-<figure>",
// plain ssh -R through the login node inside a second ssh (the double hop its session takes),
// and "relay-{nodelay,nagle}-{wwr,split-reply}-p50-us", the write-write-read request and a
// reply in two writes through its relay with and without TCP_NODELAY.
const tunnelBenchmarks = "^BenchmarkTunnel"

// pathFigures are the figures measured of both a tunnel and its baseline.
var pathFigures = []string{"up-MiB/s", "down-MiB/s", "rtt-p50-us", "rtt-p99-us", "setup/s", "wwr-p50-us", "split-reply-p50-us"}

// runTunnelBenchmarks runs every tunnel benchmark for rounds interleaved rounds and reports
// their figures, the ratios to the baselines and the targets of issue 17.
func runTunnelBenchmarks(ctx context.Context, root, dir string, rounds int, r *bench.Report) error {
	bin := filepath.Join(dir, "inject-tunnel.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./inject")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("compiling the tunnel benchmarks: %w\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^$", "-test.bench", tunnelBenchmarks,
		"-test.benchtime", "1x", "-test.count", "1", "-tunnel.rounds", strconv.Itoa(rounds))
	cmd.Dir = filepath.Join(root, "inject")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(out, 4000))
	}
	results, err := parseMetrics(out)
	if err != nil {
		return err
	}
	reportTunnels(results, r)
	return nil
}

// metrics are one benchmark's custom metrics, unit to value.
type metrics map[string]float64

var procsSuffix = regexp.MustCompile(`-\d+$`)

// parseMetrics reads every result line of go test -bench output, keyed by the benchmark's
// name without "Benchmark" and the GOMAXPROCS suffix: "TunnelForward/exec".
func parseMetrics(out []byte) (map[string]metrics, error) {
	results := map[string]metrics{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := procsSuffix.ReplaceAllString(strings.TrimPrefix(fields[0], "Benchmark"), "")
		m := metrics{}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("reading %q: %w", sc.Text(), err)
			}
			m[fields[i+1]] = v
		}
		results[name] = m
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("no benchmark result in:\n%s", tail(out, 4000))
	}
	return results, nil
}

// reportTunnels prints each path's figures beside its baseline's, the ratios, and a target
// line per path and figure: throughput within 0.9x of the baseline's, p50 round trip within
// the baseline's + 100 us, set-up rate within 1.2x; and the other metrics as they are.
func reportTunnels(results map[string]metrics, r *bench.Report) {
	names := make([]string, 0, len(results))
	for name := range results {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m := results[name]
		path := benchName(name)
		for _, fig := range pathFigures {
			t, okT := m["tunnel-"+fig]
			p, okP := m["plain-"+fig]
			if !okT || !okP {
				continue
			}
			unit, short := figureUnit(fig)
			r.Figure(path+"-"+short, t, unit)
			r.Figure(path+"-plain-"+short, p, unit)
			for _, other := range []string{"hop", "session"} {
				if v, ok := m[other+"-"+fig]; ok {
					r.Figure(path+"-"+other+"-"+short, v, unit)
				}
			}
		}
		for _, k := range sortedKeys(m) {
			if k == "ns/op" || isPathFigure(k) {
				continue
			}
			if what, command, ok := cpuMetric(k); ok {
				r.Figure(path+"-"+what+"-cpu-"+command, m[k], "ms/MiB")
				continue
			}
			if strings.HasPrefix(k, "relay-") {
				unit, short := figureUnit(k)
				r.Figure(path+"-"+short, m[k], unit)
				continue
			}
			r.Figure(path+"-"+strings.TrimPrefix(k, "tunnel-"), m[k], "")
		}
		if up, ok := tunnelRatio(m, "up-MiB/s"); ok {
			down, _ := tunnelRatio(m, "down-MiB/s")
			r.Figure(path+"-throughput-vs-plain", min(up, down), "x")
			r.Target(path+": throughput within 0.9x of plain ssh", fmt.Sprintf("up %.2fx (%.0f vs %.0f MiB/s), down %.2fx (%.0f vs %.0f)",
				up, m["tunnel-up-MiB/s"], m["plain-up-MiB/s"], down, m["tunnel-down-MiB/s"], m["plain-down-MiB/s"]), up >= 0.9 && down >= 0.9)
		}
		if t, ok := m["tunnel-rtt-p50-us"]; ok {
			p := m["plain-rtt-p50-us"]
			r.Target(path+": round trip p50 within plain + 100us", fmt.Sprintf("%.0fus vs %.0fus (+%.0fus; p99 %.0f vs %.0f)",
				t, p, t-p, m["tunnel-rtt-p99-us"], m["plain-rtt-p99-us"]), t <= p+100)
		}
		if s, ok := tunnelRatio(m, "setup/s"); ok {
			r.Target(path+": new connections within 1.2x of plain", fmt.Sprintf("%.0f vs %.0f per s (%.2fx the time)",
				m["tunnel-setup/s"], m["plain-setup/s"], 1/s), s >= 1/1.2)
		}
		if session, ok := m["session-setup/s"]; ok && session > 0 {
			r.Info(path+": a session of the same master running the connect command", fmt.Sprintf("%.0f set-ups/s, %.2fx the time of plain ssh -W: OpenSSH's own cost of the mode",
				session, m["plain-setup/s"]/session))
			r.Target(path+": new connections within 1.2x of that session", fmt.Sprintf("%.2fx the time (%.0f vs %.0f per s): socat and exec-relay",
				session/m["tunnel-setup/s"], m["tunnel-setup/s"], session), m["tunnel-setup/s"] >= session/1.2)
		}
		if split, ok := m["tunnel-split-reply-p50-us"]; ok && strings.HasPrefix(name, "TunnelForward/") {
			r.Target(path+": a reply in two writes not held for the client's delayed ACK (p50 under 20 ms, the ACK waits 40)",
				fmt.Sprintf("%.1f ms (plain ssh %.1f ms)", split/1e3, m["plain-split-reply-p50-us"]/1e3), split < 20e3)
		}
		if hopUp, ok := m["hop-up-MiB/s"]; ok && m["plain-up-MiB/s"] > 0 && m["plain-down-MiB/s"] > 0 {
			r.Info(path+": plain ssh -R through the login node (double hop)", fmt.Sprintf("up %.2fx, down %.2fx of plain; rtt p50 %.0fus; %.0f set-ups/s",
				hopUp/m["plain-up-MiB/s"], m["hop-down-MiB/s"]/m["plain-down-MiB/s"], m["hop-rtt-p50-us"], m["hop-setup/s"]))
			if hopUp > 0 && m["hop-down-MiB/s"] > 0 {
				r.Info(path+": the tunnel against that double hop", fmt.Sprintf("up %.2fx, down %.2fx; rtt p50 %+.0fus; set-ups %.2fx",
					m["tunnel-up-MiB/s"]/hopUp, m["tunnel-down-MiB/s"]/m["hop-down-MiB/s"], m["tunnel-rtt-p50-us"]-m["hop-rtt-p50-us"], m["tunnel-setup/s"]/m["hop-setup/s"]))
			}
		}
		if _, ok := m["tunnel-cpu-total-ms/MiB"]; ok {
			r.Info(path+": CPU per MiB carried, by program", cpuBreakdown(m))
		}
		if nagle, ok := m["relay-nagle-wwr-p50-us"]; ok {
			r.Info(path+": write-write-read through the relay, TCP_NODELAY", fmt.Sprintf("%.0fus with, %.0fus without (Nagle)", m["relay-nodelay-wwr-p50-us"], nagle))
		}
		if nagle, ok := m["relay-nagle-split-reply-p50-us"]; ok {
			r.Info(path+": a reply in two writes through the relay, TCP_NODELAY", fmt.Sprintf("%.0fus with, %.0fus without (Nagle)", m["relay-nodelay-split-reply-p50-us"], nagle))
		}
		if opened, ok := m["tunnel-crowd-opened"]; ok {
			done := m["tunnel-crowd-completed"]
			r.Target(fmt.Sprintf("%s: %.0f connections at once all complete", path, opened),
				fmt.Sprintf("%.0f completed in %.1fs (plain master: %.0f)", done, m["tunnel-crowd-s"], m["plain-crowd-completed"]), done == opened)
			peak, limit := m["tunnel-crowd-peak-MiB"], m["tunnel-memory-limit-MiB"]
			r.Target(path+": the container's memory within its limit meanwhile", fmt.Sprintf("peak %.0f MiB of %.0f MiB", peak, limit), peak <= limit)
		}
	}
}

// cpuMetric splits a CPU-per-MiB metric, "<what>-cpu-<command>-ms/MiB", into what was measured
// (tunnel, plain, hop) and the command.
func cpuMetric(k string) (what, command string, ok bool) {
	rest, ok := strings.CutSuffix(k, "-ms/MiB")
	if !ok {
		return "", "", false
	}
	what, command, ok = strings.Cut(rest, "-cpu-")
	return what, command, ok
}

// cpuBreakdown says the CPU per MiB of the tunnel, program by program, most first, and the
// totals of the double hop and of plain ssh beside it.
func cpuBreakdown(m metrics) string {
	type part struct {
		command string
		ms      float64
	}
	var parts []part
	for k, v := range m {
		if what, command, ok := cpuMetric(k); ok && what == "tunnel" && command != "total" && command != "bench" {
			parts = append(parts, part{command, v})
		}
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Compare(b.ms, a.ms) })
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = fmt.Sprintf("%s %.1f", p.command, p.ms)
	}
	return fmt.Sprintf("tunnel %.1f ms (%s), double hop %.1f, plain %.1f; the bench's client and server %.1f",
		m["tunnel-cpu-total-ms/MiB"], strings.Join(names, ", "), m["hop-cpu-total-ms/MiB"], m["plain-cpu-total-ms/MiB"], m["tunnel-cpu-bench-ms/MiB"])
}

// benchName is a benchmark's name as a figure's: "TunnelForward/exec" is "tunnel-forward-exec".
func benchName(name string) string {
	name = strings.ReplaceAll(strings.TrimPrefix(name, "Tunnel"), "/", "-")
	return "tunnel-" + strings.ToLower(name)
}

// figureUnit splits a metric's unit from its name: "up-MiB/s" is MiB/s, "up".
func figureUnit(fig string) (unit, short string) {
	switch {
	case strings.HasSuffix(fig, "-MiB/s"):
		return "MiB/s", strings.TrimSuffix(fig, "-MiB/s")
	case strings.HasSuffix(fig, "-us"):
		return "us", strings.TrimSuffix(fig, "-us")
	case strings.HasSuffix(fig, "/s"):
		return "/s", strings.TrimSuffix(fig, "/s")
	}
	return "", fig
}

func isPathFigure(k string) bool {
	for _, fig := range pathFigures {
		if k == "tunnel-"+fig || k == "plain-"+fig || k == "hop-"+fig || k == "session-"+fig {
			return true
		}
	}
	return false
}

// ratio is the tunnel's figure over the baseline's.
func tunnelRatio(m metrics, fig string) (float64, bool) {
	t, okT := m["tunnel-"+fig]
	p, okP := m["plain-"+fig]
	if !okT || !okP || p == 0 {
		return 0, false
	}
	return t / p, true
}

func sortedKeys(m metrics) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// tail is the last n bytes of out, for an error message.
func tail(out []byte, n int) []byte {
	if len(out) > n {
		return out[len(out)-n:]
	}
	return out
}
