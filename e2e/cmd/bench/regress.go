package main

import (
	"fmt"
	"math"

	"github.com/interlink-hq/shadowgate/e2e/bench"
)

// comparison is one round of one benchmark against the baseline: this code, the baseline's,
// and this code again, run one after the other.
type comparison struct {
	current, baseline, again goResult
}

// ratio is this code's time to the baseline's, this code's two runs taken together
// (geometric mean): they flank the baseline's, so a load that drifts during the three counts
// alike on both sides.
func (c comparison) ratio() float64 {
	return math.Sqrt(c.current.nsPerOp*c.again.nsPerOp) / c.baseline.nsPerOp
}

// repeat is this code's second run to its first: the same code, so what it differs from 1 by
// is the run's noise.
func (c comparison) repeat() float64 { return c.again.nsPerOp / c.current.nsPerOp }

// typicalBound is how much slower than the baseline's the typical pod's admission may be.
const typicalBound = 1.1

// noiseFactor is how many times the run's noise a ratio must exceed 1 by to be a regression:
// with once, identical code is called slower in about one run in eight (seven benchmarks,
// three rounds), with twice in well under one in a hundred.
const noiseFactor = 2

// noiseCeiling is the noise, as a factor's excess over 1, above which the run judges nothing:
// a machine that busy cannot tell a regression from its own load.
const noiseCeiling = 0.2

// reportRegressions judges each benchmark against the baseline rev. A benchmark's figure is
// the median over the rounds of its ratio to the baseline; its noise is the median over the
// rounds of how far its repeat differed from its first run (either way), the same code
// measured as the ratio is, and the run's noise is the largest of those. A benchmark whose
// ratio exceeds 1 by more than noiseFactor times the run's noise regressed, and is MISSED by
// name; above noiseCeiling nothing is judged, and the summary says so. A benchmark the
// baseline lacks is said, not judged.
func reportRegressions(r *bench.Report, rev string, rounds []map[string]comparison) {
	noise := 0.0 // as |log| of a factor
	for _, b := range goBenchmarks {
		var repeats []float64
		for _, round := range rounds {
			if c, ok := round[b.name]; ok {
				repeats = append(repeats, math.Abs(math.Log(c.repeat())))
			}
		}
		if len(repeats) > 0 {
			noise = math.Max(noise, bench.Median(repeats))
		}
	}
	percent := 100 * (math.Exp(noise) - 1)
	r.Figure("inprocess-noise", percent, "%")
	judged := math.Exp(noise)-1 <= noiseCeiling
	for _, b := range goBenchmarks {
		var ratios []float64
		for _, round := range rounds {
			if c, ok := round[b.name]; ok {
				ratios = append(ratios, c.ratio())
			}
		}
		want := fmt.Sprintf("%s: no slower than at %s, beyond the run's noise", b.name, rev)
		if len(ratios) == 0 {
			r.Info(want, "not compared: the baseline has no such benchmark")
			continue
		}
		ratio := bench.Median(ratios)
		r.Figure("inprocess-"+b.name+"-vs-baseline", ratio, "x")
		figure := fmt.Sprintf("%.2fx (noise %.1f%%)", ratio, percent)
		if !judged {
			r.Info(want, fmt.Sprintf("%s: not judged, the run's noise is over %.0f%%", figure, 100*noiseCeiling))
		} else {
			r.Target(want, figure, math.Log(ratio) <= noiseFactor*noise)
		}
		if b.name == "mutate-typical" {
			r.Target(fmt.Sprintf("typical pod within %.1fx of %s", typicalBound, rev), fmt.Sprintf("%.2fx", ratio), ratio <= typicalBound)
		}
	}
}
