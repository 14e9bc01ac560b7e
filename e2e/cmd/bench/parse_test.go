package main

import (
	"bytes"
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
	if _, err := parseGoBenchmark([]byte("PASS\n")); err == nil {
		t.Error("no error for output without a result")
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
	out := []byte(`BenchmarkTunnelForward/exec-2   	3	27671613788 ns/op	 200.0 plain-crowd-completed	 103.3 plain-down-MiB/s	 166.5 plain-rtt-p50-us	 533.5 plain-rtt-p99-us	 56.80 plain-setup/s	 231.0 plain-up-MiB/s	 206.2 plain-wwr-p50-us	 200.0 tunnel-crowd-completed	 200 tunnel-crowd-opened	 60.75 tunnel-crowd-peak-MiB	 11.06 tunnel-crowd-s	 100 tunnel-down-MiB/s	 128.0 tunnel-memory-limit-MiB	 272.4 tunnel-rtt-p50-us	 999.4 tunnel-rtt-p99-us	 50 tunnel-setup/s	 220 tunnel-up-MiB/s	 302.7 tunnel-wwr-p50-us
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
	var buf bytes.Buffer
	r := bench.NewReport(&buf)
	reportTunnels(results, r)
	r.Summary(time.Now())
	for want, line := range map[string]string{
		"a figure per path and baseline":                  "BENCH tunnel-forward-exec-up 220 MiB/s",
		"the baseline's figure beside it":                 "BENCH tunnel-forward-exec-plain-up 231 MiB/s",
		"throughput at 0.95x and 0.97x is met":            "MET     tunnel-forward-exec: throughput within 0.9x",
		"a round trip 106us over the baseline is missed":  "MISSED  tunnel-forward-exec: round trip p50 within plain + 100us",
		"50 against 56.8 set-ups a second is met at 1.2x": "MET     tunnel-forward-exec: new connections within 1.2x",
		"every connection of the crowd completed":         "MET     tunnel-forward-exec: 200 connections at once all complete",
	} {
		if !strings.Contains(buf.String(), line) {
			t.Errorf("%s: no %q in:\n%s", want, line, buf.String())
		}
	}
	if _, err := parseMetrics([]byte("PASS\n")); err == nil {
		t.Error("no error for output without a result")
	}
}
