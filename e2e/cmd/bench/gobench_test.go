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
