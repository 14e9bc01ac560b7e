package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPercentileIsTheNearestRank(t *testing.T) {
	var samples []time.Duration
	for i := 100; i >= 1; i-- {
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond, 0.5: time.Millisecond} {
		if got := Percentile(samples, p); got != want {
			t.Errorf("p%v = %s, want %s", p, got, want)
		}
	}
	if Percentile(nil, 99) != 0 || Median(nil) != 0 {
		t.Error("no samples must give 0")
	}
	if got := Median([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("median %v, want 2.5", got)
	}
}

func TestReportPrintsOneLinePerFigureAndTheTargets(t *testing.T) {
	var out bytes.Buffer
	r := NewReport(&out)
	r.Figure("https-validate-requests-per-core-second", 5766.4, "req/s/core")
	r.Duration("inprocess-mutate-typical-time", 61500*time.Nanosecond)
	r.Duration("apiserver-baseline-10clients-p99", 37600*time.Microsecond)
	r.Target("wanted", "figure", false)
	r.Info("explained", "another figure")
	r.Summary(time.Now())
	text := out.String()
	for _, want := range []string{
		"BENCH https-validate-requests-per-core-second 5766 req/s/core\n",
		"BENCH inprocess-mutate-typical-time 61.5 us\n",
		"BENCH apiserver-baseline-10clients-p99 37.6 ms\n",
		"\nSUMMARY (",
		"MISSED  wanted",
		"INFO    explained",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

// The process's own CPU time, read from /proc, grows as it works (in 10 ms ticks).
func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		now, err := ProcessCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now > before {
			return
		}
	}
	t.Errorf("CPU time did not grow from %s in a minute of work", before)
}

// A stat line is read after its command name's last parenthesis, whatever the name holds.
func TestAStatLineIsReadAfterTheCommandName(t *testing.T) {
	line := "4242 (a) b (c) S 7 4242 4242 0 -1 4194560 120 0 0 0 250 50 0 0 20 0 1 0 100 1000 10\n"
	got, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	want := Process{PID: 4242, PPID: 7, PGRP: 4242, Comm: "a) b (c", CPU: 3 * time.Second}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseStat("4242 no name S 1"); err == nil {
		t.Error("a line without a command name is read")
	}
}

// A process's descendants are its children's, and so on, and never its parent's or siblings'.
func TestDescendantsFollowParents(t *testing.T) {
	procs := []Process{{PID: 1}, {PID: 10, PPID: 1}, {PID: 11, PPID: 10}, {PID: 12, PPID: 11}, {PID: 20, PPID: 1}}
	got := Descendants(procs, 10)
	if len(got) != 3 || !got[10] || !got[11] || !got[12] {
		t.Errorf("descendants of 10: %v, want 10, 11 and 12", got)
	}
	if got := Descendants(procs, 11, 20); len(got) != 3 || !got[11] || !got[12] || !got[20] {
		t.Errorf("descendants of 11 and 20: %v, want 11, 12 and 20", got)
	}
}
