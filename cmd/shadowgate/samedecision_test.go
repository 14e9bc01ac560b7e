package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/inject/goldencase"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
	"github.com/interlink-hq/shadowgate/webhook"
)

// Every golden case of inject, fed to `shadowgate render` and to the webhook's two pod
// handlers in turn (the mutating one's patch applied to the pod as the API server would, then
// the validating one's CREATE, its shadow caught where it would be applied), comes out the
// same: the same mutated pod, the same shadow objects, the same warnings. Both call inject's
// pipeline; this holds them to it.
func TestRenderAndTheWebhookDecideAlike(t *testing.T) {
	cases, err := goldencase.Read("../../inject/testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			policyFile, podFile := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "pod.yaml")
			for file, data := range map[string][]byte{policyFile: c.PolicyYAML, podFile: c.PodYAML} {
				if err := os.WriteFile(file, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut := runCLI(t, "", "render", "--policy", policyFile, "-f", podFile, "-o", "json")
			if code != 0 {
				t.Fatalf("render exited %d:\n%s", code, errOut)
			}
			var list struct{ Items []unstructured.Unstructured }
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				t.Fatal(err)
			}
			var cliWarnings []string
			for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
				if w, ok := strings.CutPrefix(line, "Warning: "); ok {
					cliWarnings = append(cliWarnings, w)
				}
			}

			hookPod, hookShadow, hookWarnings := throughTheWebhook(t, c.Policy, c.PodYAML)
			if diff := cmp.Diff(list.Items[0].GetAnnotations(), hookPod.GetAnnotations()); diff != "" {
				t.Errorf("the mutated pod's annotations differ (-render +webhook):\n%s", diff)
			}
			var hookObjects []unstructured.Unstructured
			if hookShadow != nil {
				for _, obj := range hookShadow.Objects() {
					hookObjects = append(hookObjects, toUnstructured(t, obj))
				}
			}
			if diff := cmp.Diff(list.Items[1:], hookObjects, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the shadow differs (-render +webhook):\n%s", diff)
			}
			if diff := cmp.Diff(cliWarnings, hookWarnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the warnings differ (-render +webhook):\n%s", diff)
			}
		})
	}
}

// throughTheWebhook sends a pod to /mutate-pods and, patched, to /validate-pods as a CREATE,
// and returns the patched pod, the shadow /validate-pods applied (nil for none) and the
// warnings of both calls.
func throughTheWebhook(t *testing.T, pol *policy.Policy, podYAML []byte) (*unstructured.Unstructured, *inject.Shadow, []string) {
	t.Helper()
	raw, err := yaml.YAMLToJSON(podYAML)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Namespace == "" { // as render's --namespace default gives it
		pod.Namespace = "default"
	}
	if raw, err = json.Marshal(&pod); err != nil {
		t.Fatal(err)
	}
	policies := fixedPolicies{pol}
	fixed := validate.Config{PolicyRef: validate.PolicyRef{Name: policy.ConfigMapName}}
	review := func(h admission.Handler, object []byte) admission.Response {
		return h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "review", Operation: admissionv1.Create, Namespace: pod.Namespace, Name: pod.Name,
			Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Object: runtime.RawExtension{Raw: object}}})
	}
	mutated := review(webhook.NewPodMutator(policies, fixed, nil), raw)
	if !mutated.Allowed {
		t.Fatalf("/mutate-pods refused the pod: %+v", mutated.Result)
	}
	if len(mutated.Patches) > 0 {
		ops, err := json.Marshal(mutated.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			t.Fatal(err)
		}
	}
	applier := &catchingApplier{}
	validated := review(webhook.NewPodValidator(policies, fixed, nil, noPods{}, applier, nil), raw)
	if !validated.Allowed {
		t.Fatalf("/validate-pods refused the pod: %+v", validated.Result)
	}
	patched := &unstructured.Unstructured{}
	if err := patched.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return patched, applier.shadow, append(mutated.Warnings, validated.Warnings...)
}

func toUnstructured(t *testing.T, obj any) unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	// Through JSON, as render prints it, so numbers have the types a decode gives them.
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

type fixedPolicies struct{ p *policy.Policy }

func (f fixedPolicies) Current() *policy.Policy { return f.p }

// catchingApplier keeps the shadow /validate-pods would apply.
type catchingApplier struct{ shadow *inject.Shadow }

func (a *catchingApplier) Apply(_ context.Context, s *inject.Shadow, _ bool) ([]string, error) {
	a.shadow = s
	return nil, nil
}

// noPods is an API server that stores no pod, so every pod's name is free.
type noPods struct{ client.Reader }

func (noPods) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
}
