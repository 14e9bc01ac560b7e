package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/validate"
)

// The mutating webhook's matchCondition reverse-tunnel-or-pre-exec (manifests/) sends only
// pods with an interlink.eu/reverse-* or pre-exec annotation: /mutate-pods admits every other
// pod as it is, so skipping the call changes nothing. Checked on the golden pods and the
// benchmarks' without those annotations, offloaded or not.
func TestMutatorLeavesAloneWhatItsMatchConditionSkips(t *testing.T) {
	_, _, _, _, example := handlers(t)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := bench.TypicalPod("elsewhere", "user", true, true)
	elsewhere.Spec.NodeSelector[validate.LabelHostname] = "worker-1"
	pods := map[string]goldenPod{}
	for name, pod := range map[string]*corev1.Pod{
		"typical": bench.TypicalPod("notebook", "user", true, false),
		"reverse": bench.TypicalPod("trainer", "user", true, true),
		"large":   bench.LargePod("big", "user", true), "not offloaded": elsewhere,
	} {
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		pods[name] = goldenPod{example, raw}
	}
	for name, in := range goldenPods(t) {
		pods[name] = in
	}
	for name, in := range pods {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(in.raw, pod); err != nil {
			t.Fatal(err)
		}
		for key := range pod.Annotations {
			if strings.HasPrefix(key, "interlink.eu/reverse-") || key == validate.AnnotationPreExec {
				delete(pod.Annotations, key)
			}
		}
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		resp := newWebhook(&PodMutator{policies: fixedPolicy{in.pol}, metrics: m}).Handle(t.Context(), admission.Request{
			AdmissionRequest: admissionv1.AdmissionRequest{UID: "req", Operation: admissionv1.Create, Kind: podGVK, Object: runtime.RawExtension{Raw: raw}}})
		if !resp.Allowed || len(resp.Patch) > 0 || len(resp.Warnings) > 0 {
			t.Errorf("%s: allowed %v, patch %s, warnings %q: want it admitted as it is", name, resp.Allowed, resp.Patch, resp.Warnings)
		}
	}
}
