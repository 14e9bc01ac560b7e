package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/bench"
)

// Each size ratio divides the large pod by the typical one with the same reverse tunnel, round
// by round, and is judged against 5x on its own: here 4x without the tunnel, met, and 6x with
// it, missed, where dividing across the pairs would give neither.
func TestSizeRatiosPairLikeWithLikeAndAreJudgedEach(t *testing.T) {
	round := func(typical, large, typicalReverse, largeReverse float64) map[string]goResult {
		return map[string]goResult{
			"mutate-typical": {nsPerOp: typical}, "mutate-large": {nsPerOp: large},
			"mutate-typical-reverse": {nsPerOp: typicalReverse}, "mutate-large-reverse": {nsPerOp: largeReverse},
		}
	}
	rounds := []map[string]goResult{
		round(20e3, 60e3, 800e3, 4800e3),  // 3x, 6x
		round(20e3, 200e3, 800e3, 800e3),  // 10x, 1x
		round(25e3, 100e3, 900e3, 6300e3), // 4x, 7x
	}
	var out bytes.Buffer
	r := bench.NewReport(&out)
	reportSizeRatios(r, rounds)
	r.Summary(time.Now())
	text := out.String()
	for _, want := range []string{
		"BENCH inprocess-large-vs-typical 4.00 x\n",
		"BENCH inprocess-large-reverse-vs-typical-reverse 6.00 x\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	for verdict, target := range map[string]string{"MET": sizeRatios[0].target + " 4.0x", "MISSED": sizeRatios[1].target + " 6.0x"} {
		found := false
		for line := range strings.Lines(text) {
			if strings.HasPrefix(line, verdict+" ") && strings.Join(strings.Fields(line)[1:], " ") == target {
				found = true
			}
		}
		if !found {
			t.Errorf("summary lacks %s %q:\n%s", verdict, target, text)
		}
	}
}

// A benchmark is judged against the baseline beyond twice the noise the run itself measured:
// for each benchmark the median over the rounds of how far its repeat differed from its first
// run, and the largest of those, here validate-pod's 10% (one 10% in each round; mutate-typical's
// 2% in two of three rounds). mutate-typical at 1.05x is within it, build-shadow at 1.3x is not
// and is MISSED by name, and a benchmark the baseline lacks is said, not judged. A run whose
// noise is over 20% judges nothing, and says so.
func TestARegressionIsMissedByNameBeyondTheRunsOwnNoise(t *testing.T) {
	run := func(current, baseline, again float64) comparison {
		return comparison{current: goResult{nsPerOp: current}, baseline: goResult{nsPerOp: baseline}, again: goResult{nsPerOp: again}}
	}
	rounds := []map[string]comparison{
		{"mutate-typical": run(105, 100, 105), "build-shadow": run(130, 100, 130), "validate-pod": run(50, 50, 55)},
		{"mutate-typical": run(104, 100, 106), "build-shadow": run(126, 100, 134), "validate-pod": run(55, 50, 50)},
		{"mutate-typical": run(106, 100, 104), "build-shadow": run(131, 100, 129), "validate-pod": run(50, 50, 55)},
	}
	var out bytes.Buffer
	r := bench.NewReport(&out)
	reportRegressions(r, "f53bd95", rounds)
	r.Summary(time.Now())
	text := out.String()
	for _, want := range []string{
		"BENCH inprocess-noise 10.0 %\n",
		"MET     mutate-typical: no slower than at f53bd95, beyond the run's noise",
		"MET     typical pod within 1.1x of f53bd95",
		"MISSED  build-shadow: no slower than at f53bd95, beyond the run's noise",
		"INFO    mutate-large: no slower than at f53bd95, beyond the run's noise",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "MISSED  mutate-typical") || strings.Contains(text, "MISSED  validate-pod") {
		t.Errorf("a benchmark within the noise is MISSED:\n%s", text)
	}
}

func TestARunTooNoisyJudgesNothing(t *testing.T) {
	noisy := []map[string]comparison{
		{"build-shadow": {current: goResult{nsPerOp: 100}, baseline: goResult{nsPerOp: 50}, again: goResult{nsPerOp: 130}}},
	}
	var out bytes.Buffer
	r := bench.NewReport(&out)
	reportRegressions(r, "f53bd95", noisy)
	r.Summary(time.Now())
	text := out.String()
	if !strings.Contains(text, "INFO    build-shadow: no slower than at f53bd95, beyond the run's noise 2.28x (noise 30.0%): not judged, the run's noise is over 20%") {
		t.Errorf("a run with 30%% noise judged:\n%s", text)
	}
	if strings.Contains(text, "MISSED") || strings.Contains(text, "MET ") {
		t.Errorf("a run with 30%% noise has a verdict:\n%s", text)
	}
}
