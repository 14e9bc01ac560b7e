package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/internal/serving"
)

// The decision and mutation path of one admission request, in-process: decoding the object
// from the request, the decision, the mutation and its JSON patch, as each endpoint's
// admission.Webhook runs them; no HTTP, no API server. make bench runs these interleaved
// (e2e/bench) and reports them beside the targets of issue 7.

// BenchmarkMutatePods is /mutate-pods on the typical and the large pod, each without and with
// the reverse tunnel (-reverse), the only case patched: large against typical is the cost of
// size alone, and large-reverse against typical-reverse the same with the snippet's work.
func BenchmarkMutatePods(b *testing.B) {
	mut, _, _, _, _ := handlers(b)
	for _, reverse := range []bool{false, true} {
		suffix := ""
		if reverse {
			suffix = "-reverse"
		}
		for name, obj := range map[string]any{
			"typical" + suffix: bench.TypicalPod("notebook", "user", true, reverse),
			"large" + suffix:   bench.LargePod("big", "user", reverse),
		} {
			b.Run(name, func(b *testing.B) {
				runAdmission(b, mut, request(b, admissionv1.Create, podGVK, obj), reverse)
			})
		}
	}
}

// BenchmarkValidatePods is /validate-pods on a pod that needs no shadow (no port, no reverse
// tunnel): the whole decision, and nothing applied.
func BenchmarkValidatePods(b *testing.B) {
	_, podV, _, _, _ := handlers(b)
	runAdmission(b, podV, request(b, admissionv1.Create, podGVK, bench.TypicalPod("notebook", "user", false, false)), false)
}

func BenchmarkValidateWorkloads(b *testing.B) {
	_, _, workV, _, _ := handlers(b)
	gvk := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	runAdmission(b, workV, request(b, admissionv1.Create, gvk, bench.Deployment("notebooks", "user")), false)
}

// runAdmission checks the response once (admitted, patched or not as wanted), then measures.
func runAdmission(b *testing.B, h admission.Handler, req admission.Request, wantPatch bool) {
	wh := serving.Webhook(h)
	ctx := context.Background()
	resp := wh.Handle(ctx, req)
	if !resp.Allowed || (len(resp.Patch) > 0) != wantPatch {
		b.Fatalf("allowed %v, patch of %d bytes, want a patch: %v; %+v", resp.Allowed, len(resp.Patch), wantPatch, resp.Result)
	}
	b.ReportAllocs()
	defer bench.CPUPerOp(b)()
	for b.Loop() {
		wh.Handle(ctx, req)
	}
}
