package webhook

import (
	"encoding/json"
	"maps"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

// The patch written from the annotations takes the object the API server sent to the same pod
// as a full diff of the whole re-encoded pod against it (what /mutate-pods used to send), and
// to exactly the pod the mutating phase made.
func TestAnnotationPatchIsTheFullDiff(t *testing.T) {
	_, _, _, _, pol := handlers(t)
	earlier := bench.TypicalPod("again", "user", true, true)
	inject.Mutate(earlier, validate.Config{Policy: pol}).Apply(earlier)
	withUserPreExec := bench.TypicalPod("own", "user", true, true)
	withUserPreExec.Annotations[validate.AnnotationPreExec] = "module load cuda\n"
	withUserPreExec.Annotations["example.org/odd~key"] = "kept"
	noLongerReverse := earlier.DeepCopy()
	noLongerReverse.Name = "stopped"
	delete(noLongerReverse.Annotations, validate.AnnotationReverseForwards)
	delete(noLongerReverse.Annotations, validate.AnnotationReverseBind)

	for name, sent := range map[string]*corev1.Pod{
		"typical":                       bench.TypicalPod("trainer", "user", true, true),
		"large":                         bench.LargePod("big", "user", true),
		"the user's own pre-exec":       withUserPreExec,
		"reinvoked on its own output":   earlier,
		"a snippet no longer asked for": noLongerReverse,
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(sent)
			if err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{}
			if err := json.Unmarshal(raw, pod); err != nil {
				t.Fatal(err)
			}
			if _, d := validate.Pod(pod, validate.Config{Policy: pol}); !d.Allowed() {
				t.Fatalf("refused: %v", d.Errors.ToAggregate())
			}
			before := maps.Clone(pod.Annotations)
			inject.Mutate(pod, validate.Config{Policy: pol}).Apply(pod)
			mutated, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			full, err := json.Marshal(admission.PatchResponseFromRaw(raw, mutated).Patches)
			if err != nil {
				t.Fatal(err)
			}
			direct, err := json.Marshal(annotationsPatch(before, pod.Annotations).Patches)
			if err != nil {
				t.Fatal(err)
			}
			byDiff, byAnnotations := patched(t, raw, full), patched(t, raw, direct)
			if diff := cmp.Diff(byDiff, byAnnotations); diff != "" {
				t.Errorf("the annotation patch and the full diff make different pods (-diff +annotations):\n%s", diff)
			}
			if diff := cmp.Diff(pod, byAnnotations); diff != "" {
				t.Errorf("the annotation patch does not make the mutated pod (-mutated +patched):\n%s", diff)
			}
		})
	}
}

// Annotations added to a pod sent without any: the API server may send no member, null or {}.
func TestAnnotationPatchAddsTheFirstAnnotations(t *testing.T) {
	ops, err := json.Marshal(annotationsPatch(nil, map[string]string{"a/b": "c"}).Patches)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{`{"metadata":{"name":"p"}}`, `{"metadata":{"name":"p","annotations":null}}`, `{"metadata":{"name":"p","annotations":{}}}`} {
		if got := patched(t, []byte(raw), ops).Annotations; !maps.Equal(got, map[string]string{"a/b": "c"}) {
			t.Errorf("%s: patched annotations %v", raw, got)
		}
	}
	if ops := annotationsPatch(map[string]string{"a": "b"}, map[string]string{"a": "b"}).Patches; len(ops) != 0 {
		t.Errorf("a patch for unchanged annotations: %v", ops)
	}
}

func patched(t *testing.T, raw, patch []byte) *corev1.Pod {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("applying %s: %v", patch, err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(out, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}
