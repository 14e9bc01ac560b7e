package webhook

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/internal/serving"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// offloadedPodCondition is the CEL of the pod webhooks' matchCondition offloaded-pod, which
// mayHaveShadow translates into Go. No CEL evaluator is in this module's graph, so the tests
// tie the two by text: change the manifests, this constant and mayHaveShadow together (and
// the chart's shadowgate.podConditions, which e2e TestChartMatchesKustomize compares). The
// API server evaluates it in e2e TestShadowPodsAreNotSentToShadowgate: interlink.eu/shadow-for,
// which every shadow pod carries, does not count.
const offloadedPodCondition = "(has(object.metadata.annotations) && object.metadata.annotations.exists(k, (k.startsWith('interlink.eu/') && k != 'interlink.eu/shadow-for') || k == 'slurm-job.vk.io/pre-exec')) " +
	"|| (has(object.spec.tolerations) && object.spec.tolerations.exists(t, has(t.key) ? t.key == 'virtual-node.interlink/no-schedule' : (has(t.operator) && t.operator == 'Exists'))) " +
	"|| (has(object.spec.nodeName) && object.spec.nodeName != '')"

// Both pod webhooks send the pods mayHaveShadow passes: /mutate-pods must see every pod it
// may have to prepare in the API server's first round, as a webhook skipped then is never
// called back when a later one adds a reverse annotation.
func TestPodWebhooksMatchWhatMayHaveShadowMirrors(t *testing.T) {
	data, err := os.ReadFile("../manifests/base/webhooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conditions := map[string][]admissionregistrationv1.MatchCondition{}
	for doc := range bytes.SplitSeq(data, []byte("\n---\n")) {
		var cfg struct {
			Webhooks []struct {
				Name            string                                   `json:"name"`
				MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions"`
			} `json:"webhooks"`
		}
		if err := yaml.Unmarshal(doc, &cfg); err != nil {
			t.Fatal(err)
		}
		for _, w := range cfg.Webhooks {
			conditions[w.Name] = w.MatchConditions
		}
	}
	want := []admissionregistrationv1.MatchCondition{{Name: "offloaded-pod", Expression: offloadedPodCondition}}
	for _, name := range []string{"mutate-pods.shadowgate.interlink.eu", "validate-pods.shadowgate.interlink.eu"} {
		got := conditions[name]
		if len(got) != 1 || got[0] != want[0] {
			t.Errorf("%s has matchConditions %+v, want %+v: change offloadedPodCondition and shadows.MayHaveShadow with the manifests", name, got, want)
		}
	}
}

// /mutate-pods admits every pod its matchCondition skips as it is, so skipping the call
// changes nothing. Checked on the golden pods and the benchmarks', offloaded or not, stripped
// of what makes mayHaveShadow (the condition's mirror) pass.
func TestMutatorLeavesAloneWhatItsMatchConditionSkips(t *testing.T) {
	_, _, _, _, example := handlers(t)
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
			if strings.HasPrefix(key, "interlink.eu/") || key == validate.AnnotationPreExec {
				delete(pod.Annotations, key)
			}
		}
		var kept []corev1.Toleration
		for _, tol := range pod.Spec.Tolerations {
			if tol.Key != validate.TolerationVirtualNode && tol.Key != "" {
				kept = append(kept, tol)
			}
		}
		pod.Spec.Tolerations = kept
		pod.Spec.NodeName = ""
		if shadows.MayHaveShadow(pod, shadows.AnyNode) {
			t.Fatalf("%s: still matched once stripped: %+v", name, pod.ObjectMeta)
		}
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		resp := serving.Webhook(NewPodMutator(shadowtest.FixedPolicy{Policy: in.pol}, validate.Config{}, nil)).Handle(t.Context(), admission.Request{
			AdmissionRequest: admissionv1.AdmissionRequest{UID: "req", Operation: admissionv1.Create, Kind: podGVK, Object: runtime.RawExtension{Raw: raw}}})
		if !resp.Allowed || len(resp.Patch) > 0 || len(resp.Warnings) > 0 {
			t.Errorf("%s: allowed %v, patch %s, warnings %q: want it admitted as it is", name, resp.Allowed, resp.Patch, resp.Warnings)
		}
	}
}
