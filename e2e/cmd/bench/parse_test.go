package main

import "testing"

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
