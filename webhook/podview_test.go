package webhook

import (
	"encoding/json"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

// Every decision the pod endpoints take on the podView is the one they would take on the whole
// Pod: the mutation, and the admission with its check that the pod was prepared and its
// shadow, for every golden case of inject (placed by node selector, by toleration alone, and
// by a catch-all toleration and a required node affinity) and the benchmarks' pods (with and
// without the mutating phase's work).
func TestPodViewDecidesAsTheWholePod(t *testing.T) {
	_, _, _, _, example := handlers(t)
	inputs := map[string]goldenPod{}
	mutated := bench.TypicalPod("mutated", "user", true, true)
	inject.Mutate(mutated, validate.Config{Policy: example}).Apply(mutated)
	generated := bench.TypicalPod("", "user", true, false)
	generated.GenerateName = "notebook-"
	for name, pod := range map[string]*corev1.Pod{
		"typical": bench.TypicalPod("notebook", "user", true, false),
		"reverse": bench.TypicalPod("trainer", "user", true, true),
		"large":   bench.LargePod("big", "user", true),
		"mutated": mutated, "generateName": generated,
	} {
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		inputs[name] = goldenPod{example, raw}
	}
	for name, in := range goldenPods(t) {
		inputs[name] = in
		// The same pod placed by its toleration alone, as on a policy of one virtual node.
		var obj map[string]any
		if err := json.Unmarshal(in.raw, &obj); err != nil {
			t.Fatal(err)
		}
		spec := obj["spec"].(map[string]any)
		delete(spec, "nodeSelector")
		delete(spec, "nodeName")
		spec["tolerations"] = []any{map[string]any{"key": validate.TolerationVirtualNode, "operator": "Exists"}}
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		inputs[name+", tolerating"] = goldenPod{in.pol, raw}
		// Tolerating every taint, with a required node affinity whose second term admits the
		// virtual node, and the affinity the view skips.
		spec["tolerations"] = []any{map[string]any{"operator": "Exists"}}
		spec["affinity"] = map[string]any{
			"nodeAffinity": map[string]any{
				"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
					map[string]any{"matchFields": []any{map[string]any{"key": "metadata.name", "operator": "In", "values": []any{"worker-1"}}}},
					map[string]any{"matchExpressions": []any{map[string]any{"key": validate.LabelHostname, "operator": "In", "values": []any{"hpc-vk"}}}},
				}},
				"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"weight": 1, "preference": map[string]any{
					"matchExpressions": []any{map[string]any{"key": "topology.kubernetes.io/zone", "operator": "In", "values": []any{"a"}}}}}},
			},
			"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
				"topologyKey": validate.LabelHostname, "labelSelector": map[string]any{"matchLabels": map[string]any{"app": "x"}}}}},
		}
		if raw, err = json.Marshal(obj); err != nil {
			t.Fatal(err)
		}
		inputs[name+", tolerating any taint, with node affinity"] = goldenPod{in.pol, raw}
		// The same, its only term pinning it to an ordinary node: a view that dropped the
		// affinity would offload it.
		spec["affinity"].(map[string]any)["nodeAffinity"].(map[string]any)["requiredDuringSchedulingIgnoredDuringExecution"] =
			map[string]any{"nodeSelectorTerms": []any{
				map[string]any{"matchFields": []any{map[string]any{"key": "metadata.name", "operator": "In", "values": []any{"worker-1"}}}},
			}}
		if raw, err = json.Marshal(obj); err != nil {
			t.Fatal(err)
		}
		inputs[name+", tolerating any taint, pinned to an ordinary node"] = goldenPod{in.pol, raw}
	}

	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			whole := &corev1.Pod{}
			if err := kjson.UnmarshalCaseSensitivePreserveInts(in.raw, whole); err != nil {
				t.Fatal(err)
			}
			view, err := decodePod(admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Kind: podGVK, Object: runtime.RawExtension{Raw: in.raw}}})
			if err != nil {
				t.Fatal(err)
			}
			same := func(what string, got, want any) {
				t.Helper()
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s on the view:\n%+v\non the whole pod:\n%+v", what, got, want)
				}
			}
			meta := func(m *corev1.Pod) []any {
				return []any{m.Name, m.GenerateName, m.Namespace, m.UID, m.Labels, m.Annotations}
			}
			same("name, namespace, UID, labels and annotations", meta(view), meta(whole))
			cfg := validate.Config{Policy: in.pol}
			mV, mW := inject.Mutate(view, cfg), inject.Mutate(whole, cfg)
			// A relay address the pod does not give is drawn at random for each call, and the
			// snippet calls it; the rest must agree.
			if _, given := whole.Annotations[validate.AnnotationReverseBind]; !given {
				for _, m := range []inject.Mutation{mV, mW} {
					delete(m.Annotations, validate.AnnotationReverseBind)
					delete(m.Annotations, validate.AnnotationPreExec)
				}
			}
			same("the mutation", mV, mW)
			same("the admission", inject.Admit(view, cfg), inject.Admit(whole, cfg))
		})
	}
}
