package inject

import (
	"testing"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/validate"
)

// BenchmarkBuildShadow is what /validate-pods computes, besides the decision, for an admitted
// pod with a port: its shadow objects (server-side applying them is the API server's work,
// measured by make bench through a real one).
func BenchmarkBuildShadow(b *testing.B) {
	pol := examplePolicy(b)
	pod := bench.TypicalPod("notebook", "user", true, false)
	pod.UID = "4d1c7f5e-0b57-4a0e-9f4c-3f2a6c1d9e01"
	o, d := validate.Pod(pod, validate.Config{Policy: pol})
	if !d.Allowed() {
		b.Fatal(d.Errors.ToAggregate())
	}
	if s, _ := buildShadow(pod, o); s == nil {
		b.Fatal("no shadow for a pod with a port")
	}
	b.ReportAllocs()
	defer bench.CPUPerOp(b)()
	for b.Loop() {
		buildShadow(pod, o)
	}
}
