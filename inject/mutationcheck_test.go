package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
)

func TestCheckMutated(t *testing.T) {
	const forwards = "minio.user.svc.cluster.local:9000"
	bindPath := "metadata.annotations[" + validate.AnnotationReverseBind + "]"
	preExecPath := "metadata.annotations[" + validate.AnnotationPreExec + "]"
	// mutated is a pod asking for forwards, as MutatePod left it.
	mutated := func(t *testing.T) *corev1.Pod {
		pod := reversePod(map[string]string{validate.AnnotationReverseForwards: forwards, validate.AnnotationPreExec: "module load cuda\n"})
		mutateInPlace(pod, admit(t, pod))
		return pod
	}
	for name, c := range map[string]struct {
		pod       func(*testing.T) *corev1.Pod
		wantField string // "" when admitted
		wantType  field.ErrorType
	}{
		"a pod MutatePod prepared is admitted": {pod: mutated},
		"a foreign prefix before the snippet is admitted": {pod: func(t *testing.T) *corev1.Pod {
			pod := mutated(t)
			pod.Annotations[validate.AnnotationPreExec] = "echo foreign\n" + pod.Annotations[validate.AnnotationPreExec]
			return pod
		}},
		"a pod asking for no tunnel, without a snippet, is admitted": {pod: func(*testing.T) *corev1.Pod {
			return reversePod(map[string]string{validate.AnnotationPreExec: "module load cuda\n"})
		}},
		"the mutating webhook skipped: no bind address recorded": {pod: func(*testing.T) *corev1.Pod {
			return reversePod(map[string]string{validate.AnnotationReverseForwards: forwards})
		}, wantField: bindPath, wantType: field.ErrorTypeRequired},
		"a bind address the user gave, but no snippet": {pod: func(*testing.T) *corev1.Pod {
			return reversePod(map[string]string{validate.AnnotationReverseForwards: forwards, validate.AnnotationReverseBind: "127.0.10.1"})
		}, wantField: preExecPath, wantType: field.ErrorTypeRequired},
		"two snippets": {pod: func(t *testing.T) *corev1.Pod {
			pod := mutated(t)
			block := userless(t, pod.Annotations[validate.AnnotationPreExec], "module load cuda\n")
			pod.Annotations[validate.AnnotationPreExec] = block + pod.Annotations[validate.AnnotationPreExec]
			return pod
		}, wantField: preExecPath, wantType: field.ErrorTypeForbidden},
		"a snippet for another bind address": {pod: func(t *testing.T) *corev1.Pod {
			pod := mutated(t)
			pod.Annotations[validate.AnnotationReverseBind] = "127.0.10.99"
			return pod
		}, wantField: preExecPath, wantType: field.ErrorTypeForbidden},
		"a snippet whose end line is gone": {pod: func(t *testing.T) *corev1.Pod {
			pod := mutated(t)
			pod.Annotations[validate.AnnotationPreExec] = strings.Replace(pod.Annotations[validate.AnnotationPreExec], markerEnd+"\n", "", 1)
			return pod
		}, wantField: preExecPath, wantType: field.ErrorTypeRequired},
		"a snippet left in a pod that asks for no tunnel": {pod: func(t *testing.T) *corev1.Pod {
			pod := mutated(t)
			delete(pod.Annotations, validate.AnnotationReverseForwards)
			return pod
		}, wantField: preExecPath, wantType: field.ErrorTypeForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			pod := c.pod(t)
			errs := checkMutated(pod, admit(t, pod))
			if c.wantField == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != c.wantField || errs[0].Type != c.wantType {
				t.Fatalf("errors %v, want one %s at %s", errs.ToAggregate(), c.wantType, c.wantField)
			}
			if !strings.Contains(errs[0].Detail, "mutating webhook (/mutate-pods) did not run") {
				t.Errorf("the message does not say the mutating webhook did not run: %s", errs[0].Detail)
			}
		})
	}
	t.Run("a pod on no listed virtual node is not judged", func(t *testing.T) {
		if errs := checkMutated(reversePod(map[string]string{validate.AnnotationReverseForwards: forwards}), nil); len(errs) > 0 {
			t.Errorf("refused: %v", errs.ToAggregate())
		}
	})
}

// A pod whose snippet MutatePod could not make is admitted by the mutating webhook with a
// warning; validation then refuses it, rather than let its job start only to stop.
func TestCheckMutatedRefusesAPodMutatePodCouldNotSetUp(t *testing.T) {
	pod := reversePod(map[string]string{validate.AnnotationReverseSocksPort: "1080"})
	o := admit(t, pod)
	if w := mutateInPlaceWith(pod, o, strings.NewReader("")); len(w) != 1 {
		t.Fatalf("warnings %v, want the one saying the tunnel could not be set up", w)
	}
	if errs := checkMutated(pod, admit(t, pod)); len(errs) != 1 || errs[0].Type != field.ErrorTypeRequired {
		t.Errorf("errors %v, want the bind address required", errs.ToAggregate())
	}
}
