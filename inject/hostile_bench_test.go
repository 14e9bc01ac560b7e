package inject

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/validate"
)

// BenchmarkHostilePods is the whole decision on a pod's create (Render: both phases, and the
// shadow of an admitted pod) for the worst inputs a pod author can build, each beside the
// typical pod with a port and the reverse tunnel in the same loop: x-typical is the ratio of
// their costs, which validate's caps keep within 10. Decoding the request, linear in its
// bytes, is not in it: the API server encoded them first.
func BenchmarkHostilePods(b *testing.B) {
	pol := examplePolicy(b)
	// The namespaces of the Services the 64-forward case names, as an admin lists them.
	node := pol.VirtualNodes["hpc-vk"]
	for i := range 64 {
		node.Network.SSH.Reverse.AllowedDestinations.Namespaces = append(node.Network.SSH.Reverse.AllowedDestinations.Namespaces, fmt.Sprintf("ns%d", i))
	}
	pol.VirtualNodes["hpc-vk"] = node
	cfg := validate.Config{Policy: pol}
	typical := bench.TypicalPod("notebook", "user", true, true)
	entries := func(n int, entry func(i int) string) string {
		out := make([]string, n)
		for i := range out {
			out[i] = entry(i)
		}
		return strings.Join(out, " ")
	}
	cases := map[string]struct {
		annotations map[string]string
		admitted    bool
	}{
		"3 MiB of pre-exec, refused for the annotations' size": {
			annotations: map[string]string{validate.AnnotationPreExec: strings.Repeat("echo x\n", 3<<20/7)}},
		"64 forwards to distinct Services, each with its hosts names": {admitted: true,
			annotations: map[string]string{validate.AnnotationReverseForwards: entries(64, func(i int) string {
				return fmt.Sprintf("%d:svc%d.ns%d.svc.cluster.local:%d", 20000+i, i, i, 1024+i)
			})}},
		"64 forwards on one listen port": {
			annotations: map[string]string{validate.AnnotationReverseForwards: entries(64, func(i int) string {
				return fmt.Sprintf("20000:svc%d.ns.svc:%d", i, 1024+i)
			})}},
		"64 forwards, each with three errors": {
			annotations: map[string]string{validate.AnnotationReverseForwards: entries(64, func(i int) string {
				return fmt.Sprintf("0x%d:$(id)%d:99999", i, i)
			})}},
		"64 extra ports": {admitted: true,
			annotations: map[string]string{validate.AnnotationExtraPorts: strings.ReplaceAll(entries(64, func(i int) string {
				return fmt.Sprintf("%d:p%d:TCP", 9000+i, i)
			}), " ", ",")}},
		"1,000 annotations of 200 bytes": {admitted: true,
			annotations: func() map[string]string {
				ann := map[string]string{}
				for i := range 1000 - len(typical.Annotations) - 2 { // the mutating phase adds two
					ann[fmt.Sprintf("example.org/key-%05d", i)] = strings.Repeat("v", 200)
				}
				return ann
			}()},
		"220 KiB of pre-exec in begin marker lines": {admitted: true,
			annotations: map[string]string{validate.AnnotationPreExec: strings.Repeat(markerBegin+"\n", (220<<10)/(len(markerBegin)+1))}},
	}
	for name, tc := range cases {
		hostile := typical.DeepCopy()
		for k, v := range tc.annotations {
			hostile.Annotations[k] = v
		}
		if r := Render(hostile, cfg); r.Decision.Allowed() != tc.admitted {
			b.Fatalf("%s: admitted %v, want %v: %v", name, r.Decision.Allowed(), tc.admitted, r.Decision.Errors.ToAggregate())
		}
		b.Run(name, func(b *testing.B) {
			var typicalTime, hostileTime time.Duration
			for b.Loop() {
				start := time.Now()
				Render(typical, cfg)
				mid := time.Now()
				Render(hostile, cfg)
				typicalTime += mid.Sub(start)
				hostileTime += time.Since(mid)
			}
			b.ReportMetric(float64(hostileTime)/float64(typicalTime), "x-typical")
		})
	}
}
