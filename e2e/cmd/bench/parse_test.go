package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/bench"
)

func TestParseGoBenchmark(t *testing.T) {
	out := []byte(`goos: linux
goarch: amd64
pkg: github.com/interlink-hq/shadowgate/webhook
BenchmarkMutatePods/typical-2   	   20000	     61054 ns/op	     60800 cpu-ns/op	    9649 B/op	     138 allocs/op
PASS
`)
	got, err := parseGoBenchmark(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := (goResult{nsPerOp: 61054, cpuNsPerOp: 60800, bytesPerOp: 9649, allocsPerOp: 138}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseGoBenchmark([]byte("PASS\n")); !errors.Is(err, errNoBenchmark) {
		t.Errorf("output without a result: %v, want errNoBenchmark", err)
	}
}

func TestServerLatencyAddsAndSubtracts(t *testing.T) {
	before := serverLatency{within: []float64{90, 99}, total: 100}
	after := serverLatency{within: []float64{180, 199}, total: 200}
	run := after.plus(before, -1)
	if run.total != 100 || run.within[0] != 90 || run.within[1] != 100 {
		t.Errorf("after - before = %+v", run)
	}
	var sum serverLatency
	sum = sum.plus(run, 1).plus(run, 1)
	if sum.total != 200 || sum.share(0) != 90 || sum.share(1) != 100 {
		t.Errorf("two runs = %+v, shares %v %v", sum, sum.share(0), sum.share(1))
	}
}

func TestTunnelBenchmarksAreReadAndHeldToTheirTargets(t *testing.T) {
	out := []byte(`BenchmarkTunnelForward/exec-2   	3	27671613788 ns/op	 200.0 plain-crowd-completed	 103.3 plain-down-MiB/s	 166.5 plain-rtt-p50-us	 533.5 plain-rtt-p99-us	 56.80 plain-setup/s	 45.00 session-setup/s	 231.0 plain-up-MiB/s	 206.2 plain-wwr-p50-us	 200.0 tunnel-crowd-completed	 200 tunnel-crowd-opened	 60.75 tunnel-crowd-peak-MiB	 11.06 tunnel-crowd-s	 100 tunnel-down-MiB/s	 128.0 tunnel-memory-limit-MiB	 272.4 tunnel-rtt-p50-us	 999.4 tunnel-rtt-p99-us	 50 tunnel-setup/s	 220 tunnel-up-MiB/s	 302.7 tunnel-wwr-p50-us	 1456 tunnel-split-reply-p50-us	 1415 session-split-reply-p50-us	 44010 plain-split-reply-p50-us
BenchmarkTunnelForward/portforward-2   	1	9671613788 ns/op	 300 plain-down-MiB/s	 150 plain-rtt-p50-us	 400 plain-rtt-p99-us	 1800 plain-setup/s	 300 plain-up-MiB/s	 150 plain-wwr-p50-us	 44000 plain-split-reply-p50-us	 300 tunnel-down-MiB/s	 150 tunnel-rtt-p50-us	 400 tunnel-rtt-p99-us	 1800 tunnel-setup/s	 300 tunnel-up-MiB/s	 150 tunnel-wwr-p50-us	 44010 tunnel-split-reply-p50-us
PASS
`)
	results, err := parseMetrics(out)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := results["TunnelForward/exec"]
	if !ok || m["tunnel-up-MiB/s"] != 220 || m["plain-setup/s"] != 56.8 {
		t.Fatalf("results %v", results)
	}
	text := summarized(results)
	for want, line := range map[string]string{
		"a figure per path and baseline":                        "BENCH tunnel-forward-exec-up 220 MiB/s",
		"the baseline's figure beside it":                       "BENCH tunnel-forward-exec-plain-up 231 MiB/s",
		"throughput at 0.95x and 0.97x is met":                  "MET     tunnel-forward-exec: throughput within 0.9x",
		"a round trip 106us over the baseline is missed":        "MISSED  tunnel-forward-exec: round trip p50 within plain + 100us",
		"50 against 56.8 set-ups a second is met at 1.2x":       "MET     tunnel-forward-exec: new connections within 1.2x",
		"every connection of the crowd completed":               "MET     tunnel-forward-exec: 200 connections at once all complete",
		"OpenSSH's session beside them, informational":          "INFO    tunnel-forward-exec: a session of the same master running the connect command",
		"50 against 45 set-ups a second of that session is met": "MET     tunnel-forward-exec: new connections within 1.2x of that session",
		"the split reply of each path":                          "BENCH tunnel-forward-exec-session-split-reply-p50 1415 us",
		"a split reply of 1.5 ms is not held for the ACK":       "MET     tunnel-forward-exec: a reply in two writes not held for the client's delayed ACK",
		"a split reply of 44 ms is":                             "MISSED  tunnel-forward-portforward: a reply in two writes not held for the client's delayed ACK",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("%s: no %q in:\n%s", want, line, text)
		}
	}
	if _, err := parseMetrics([]byte("PASS\n")); err == nil {
		t.Error("no error for output without a result")
	}
}

func TestReverseTunnelRowsAreReadAndHeldToTheirTargets(t *testing.T) {
	out := []byte(`BenchmarkTunnelReverse/ssh-2         	       1	25752281989 ns/op	       127.5 hop-down-MiB/s	       459.3 hop-rtt-p50-us	      1246 hop-rtt-p99-us	       313.3 hop-setup/s	       128.7 hop-up-MiB/s	       599.0 hop-wwr-p50-us	       199.6 plain-down-MiB/s	       263.8 plain-rtt-p50-us	       498.7 plain-rtt-p99-us	      1780 plain-setup/s	       137.1 plain-up-MiB/s	       492.6 plain-wwr-p50-us	       44157 relay-nagle-split-reply-p50-us	       1755 relay-nodelay-split-reply-p50-us	       579.7 relay-nagle-wwr-p50-us	       559.5 relay-nodelay-wwr-p50-us	        190 tunnel-down-MiB/s	       372.1 tunnel-rtt-p50-us	      3011 tunnel-rtt-p99-us	       1600 tunnel-setup/s	        39.63 tunnel-up-MiB/s	       371.0 tunnel-wwr-p50-us
BenchmarkTunnelReverse/srun-2        	       1	45752281989 ns/op	       120 hop-down-MiB/s	       450 hop-rtt-p50-us	      1200 hop-rtt-p99-us	       300 hop-setup/s	       125 hop-up-MiB/s	       590 hop-wwr-p50-us	       200 plain-down-MiB/s	       260 plain-rtt-p50-us	       500 plain-rtt-p99-us	      1700 plain-setup/s	       130 plain-up-MiB/s	       490 plain-wwr-p50-us	        20 tunnel-down-MiB/s	       900 tunnel-rtt-p50-us	      4000 tunnel-rtt-p99-us	       100 tunnel-setup/s	        25 tunnel-up-MiB/s	       1000 tunnel-wwr-p50-us
PASS
`)
	results, err := parseMetrics(out)
	if err != nil {
		t.Fatal(err)
	}
	text := summarized(results)
	for want, line := range map[string]string{
		"the tunnel's figure":                               "BENCH tunnel-reverse-ssh-up 39.6 MiB/s",
		"plain ssh -R beside it":                            "BENCH tunnel-reverse-ssh-plain-up 137 MiB/s",
		"the double hop beside it, with its unit":           "BENCH tunnel-reverse-ssh-hop-down 128 MiB/s",
		"the relay with Nagle's algorithm":                  "BENCH tunnel-reverse-ssh-relay-nagle-wwr-p50 580 us",
		"the relay with TCP_NODELAY":                        "BENCH tunnel-reverse-ssh-relay-nodelay-wwr-p50 560 us",
		"the srun carrier as its own path":                  "BENCH tunnel-reverse-srun-up 25.0 MiB/s",
		"up at 0.29x is missed though down at 0.95x is not": "MISSED  tunnel-reverse-ssh: throughput within 0.9x",
		"a round trip 108us over plain is missed":           "MISSED  tunnel-reverse-ssh: round trip p50 within plain + 100us",
		"1600 set-ups/s against 1780 is within 1.2x":        "MET     tunnel-reverse-ssh: new connections within 1.2x",
		"100 set-ups/s against 1700 is not":                 "MISSED  tunnel-reverse-srun: new connections within 1.2x",
		"the double hop against plain, informational":       "INFO    tunnel-reverse-ssh: plain ssh -R through the login node (double hop)",
		"its ratios": "up 0.94x, down 0.64x of plain; rtt p50 459us; 313 set-ups/s",
		"the tunnel against the double hop, informational": "INFO    tunnel-reverse-ssh: the tunnel against that double hop",
		"the Nagle figures, informational":                 "INFO    tunnel-reverse-ssh: write-write-read through the relay, TCP_NODELAY",
		"both of them":                                     "560us with, 580us without (Nagle)",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("%s: no %q in:\n%s", want, line, text)
		}
	}
	for _, wrong := range []string{"tunnel-reverse-ssh-hop-up-MiB/s", "tunnel-reverse-srun: write-write-read through the relay"} {
		if strings.Contains(text, wrong) {
			t.Errorf("%q in:\n%s", wrong, text)
		}
	}
}

// The CPU a reverse tunnel's bytes cost is reported program by program, each as a figure in
// ms/MiB and, for the tunnel, in one summary row, most first, beside the double hop's and
// plain ssh's totals.
func TestTheCPUPerMiBIsSaidProgramByProgram(t *testing.T) {
	out := []byte("BenchmarkTunnelReverse/srun-2 1 5 ns/op 12.0 tunnel-cpu-slurmstepd-ms/MiB 7.5 tunnel-cpu-srun-ms/MiB " +
		"4.7 tunnel-cpu-python3-ms/MiB 46.0 tunnel-cpu-total-ms/MiB 3.0 tunnel-cpu-bench-ms/MiB 12.7 hop-cpu-total-ms/MiB 6.6 plain-cpu-total-ms/MiB\n")
	results, err := parseMetrics(out)
	if err != nil {
		t.Fatal(err)
	}
	text := summarized(results)
	for _, want := range []string{
		"BENCH tunnel-reverse-srun-tunnel-cpu-slurmstepd 12.0 ms/MiB\n",
		"BENCH tunnel-reverse-srun-hop-cpu-total 12.7 ms/MiB\n",
		"tunnel-reverse-srun: CPU per MiB carried, by program",
		"tunnel 46.0 ms (slurmstepd 12.0, srun 7.5, python3 4.7), double hop 12.7, plain 6.6; the bench's client and server 3.0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

// summarized is what make bench prints of results: their figures and the summary.
func summarized(results map[string]metrics) string {
	var buf bytes.Buffer
	r := bench.NewReport(&buf)
	reportTunnels(results, r)
	r.Summary(time.Now())
	return buf.String()
}
