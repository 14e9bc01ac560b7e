package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Report prints one line per figure, `BENCH <name> <value> <unit>`, as it is measured, and at
// the end a summary: each target of issue 7 beside its figure.
type Report struct {
	w       io.Writer
	targets []string
	started time.Time
}

// NewReport writes to w.
func NewReport(w io.Writer) *Report { return &Report{w: w, started: time.Now()} }

// Figure prints one figure.
func (r *Report) Figure(name string, value float64, unit string) {
	fmt.Fprintf(r.w, "BENCH %s %s %s\n", name, formatValue(value), unit)
}

// Duration prints a latency in milliseconds, or microseconds below one.
func (r *Report) Duration(name string, d time.Duration) {
	if d < time.Millisecond {
		r.Figure(name, float64(d)/float64(time.Microsecond), "us")
		return
	}
	r.Figure(name, float64(d)/float64(time.Millisecond), "ms")
}

// Note prints a line that is not a figure: what ran, and on what, after how long since the
// report began (make bench has a budget of minutes; this says which phase spends it).
func (r *Report) Note(format string, args ...any) {
	fmt.Fprintf(r.w, "# [%s] "+format+"\n", append([]any{time.Since(r.started).Round(time.Second)}, args...)...)
}

// Target records a target for the summary: what is wanted, the figure, and whether it is met.
func (r *Report) Target(want, figure string, met bool) {
	verdict := "MET   "
	if !met {
		verdict = "MISSED"
	}
	r.targets = append(r.targets, fmt.Sprintf("%s  %-62s %s", verdict, want, figure))
}

// Info records a row for the summary that has no target: a figure reported beside the
// targets to explain them.
func (r *Report) Info(what, figure string) {
	r.targets = append(r.targets, fmt.Sprintf("%s  %-62s %s", "INFO  ", what, figure))
}

// Summary prints the targets and the machine's load, which inflates every wall-clock figure
// on a shared machine (the ratios and allocation counts are not inflated by it).
func (r *Report) Summary(started time.Time) {
	fmt.Fprintf(r.w, "\nSUMMARY (%s; load average %s; %s)\n", time.Since(started).Round(time.Second), LoadAverage(), Machine())
	for _, t := range r.targets {
		fmt.Fprintln(r.w, t)
	}
}

// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// Machine names the CPU model and count.
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d x %s", NumCPU(), model)
}

func formatValue(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// Percentile returns the p-th percentile (0 < p <= 100) of samples, by the nearest-rank
// method; samples is sorted in place.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	rank := int(float64(len(samples))*p/100+0.999999) - 1
	return samples[min(max(rank, 0), len(samples)-1)]
}

// Median returns the median of values; values is sorted in place.
func Median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	slices.Sort(values)
	n := len(values)
	if n%2 == 1 {
		return values[n/2]
	}
	return (values[n/2-1] + values[n/2]) / 2
}
