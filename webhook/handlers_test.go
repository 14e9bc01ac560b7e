package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/internal/serving"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// handlers builds the validation handlers around the example policy. The pod validator has no
// Applier: these tests only reach refusals and UPDATEs, which apply nothing.
func handlers(t testing.TB) (*PodMutator, *PodValidator, *WorkloadValidator, *ConfigMapValidator, *policy.Policy) {
	t.Helper()
	pol := shadowtest.ExamplePolicy(t)
	fixed := validate.Config{PolicyRef: validate.PolicyRef{Namespace: "shadowgate-system", Name: policy.ConfigMapName}}
	src := shadowtest.FixedPolicy{Policy: pol}
	return NewPodMutator(src, fixed, nil), NewPodValidator(src, fixed, nil, nil, nil, nil),
		NewWorkloadValidator(src, fixed, nil), NewConfigMapValidator(src, fixed), pol
}

func request(t testing.TB, op admissionv1.Operation, kind metav1.GroupVersionKind, obj any) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req", Operation: op, Kind: kind, Object: runtime.RawExtension{Raw: raw},
	}}
}

// podGVK is podVersionKind as an admission request names it.
var podGVK = metav1.GroupVersionKind(podVersionKind)

// causes are the field causes of a denial, as kubectl prints them.
func causes(t *testing.T, resp admission.Response) []string {
	t.Helper()
	if resp.Allowed {
		t.Fatal("admitted")
	}
	if resp.Result.Reason != metav1.StatusReasonInvalid || resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Details == nil {
		t.Fatalf("denial is not an Invalid status with details: %+v", resp.Result)
	}
	var out []string
	for _, c := range resp.Result.Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	return out
}

// errorLines are the same for a decision of package validate.
func errorLines(d validate.Decision) []string {
	var out []string
	for _, e := range d.Errors {
		out = append(out, e.Error())
	}
	return out
}

func sameLines(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\ngot  %q\nwant %q", len(got), len(want), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("line %d:\ngot  %q\nwant %q", i, got[i], want[i])
		}
	}
}

// The handlers decide through validate.Object, the function `shadowgate check` calls: the same
// objects get the same errors, in the same order, and the same warnings.
func TestHandlersDecideAsValidateObject(t *testing.T) {
	_, podV, workV, cmV, pol := handlers(t)
	ref := validate.PolicyRef{Namespace: "shadowgate-system", Name: policy.ConfigMapName}
	ctx := context.Background()

	refusedPod := shadowtest.Pod("trainer", map[string]string{
		validate.AnnotationReverseForwards:  "minio:http 80:web:8080",
		validate.AnnotationReverseBind:      "127.0.0.1",
		validate.AnnotationReverseOwnerOnly: "true",
	})
	d, _ := validate.Object(refusedPod, validate.Config{Policy: pol, PolicyRef: ref, Credentials: validate.CredentialRules{}})
	resp := podV.Handle(ctx, request(t, admissionv1.Create, podGVK, refusedPod))
	sameLines(t, causes(t, resp), errorLines(d))
	sameLines(t, resp.Warnings, d.Warnings)

	deploy := &appsv1.Deployment{}
	if err := yaml.Unmarshal([]byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: trainers, namespace: user}
spec:
  selector: {matchLabels: {app: t}}
  template:
    metadata: {labels: {app: t}, annotations: {interlink.eu/reverse-socks-port: "1080"}}
    spec: {nodeName: hpc-vk, containers: [{name: c, image: busybox}]}
`), deploy); err != nil {
		t.Fatal(err)
	}
	req := request(t, admissionv1.Create, metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, deploy)
	d, judged := validate.Object(deploy, validate.Config{Policy: pol, PolicyRef: ref, Credentials: validate.CredentialRules{}})
	if !judged {
		t.Fatal("validate does not judge Deployments")
	}
	sameLines(t, causes(t, workV.Handle(ctx, req)), errorLines(d))

	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "shadow-x-node", Namespace: "user-shadow"}, Data: map[string]string{validate.ComputeNodeKey: "node07 -oProxyCommand=touch /tmp/pwned"}},
		{ObjectMeta: metav1.ObjectMeta{Name: policy.ConfigMapName, Namespace: "shadowgate-system"}, Data: map[string]string{policy.DataKey: "virtualNodes:\n  x:\n    Network: {ShadowMode: ssh, FullMesh: true}\n"}},
	} {
		d, _ := validate.Object(cm, validate.Config{Policy: pol, PolicyRef: ref, Credentials: validate.CredentialRules{}})
		sameLines(t, causes(t, cmV.Handle(ctx, request(t, admissionv1.Update, metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, cm))), errorLines(d))
	}
}

// A policy ConfigMap of the same name in another namespace is not the policy.
func TestConfigMapValidatorKnowsWhichConfigMapIsThePolicy(t *testing.T) {
	_, _, _, cmV, _ := handlers(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: policy.ConfigMapName, Namespace: "user"}, Data: map[string]string{policy.DataKey: "not: a policy"}}
	resp := cmV.Handle(context.Background(), request(t, admissionv1.Create, metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, cm))
	if !resp.Allowed {
		t.Fatalf("refused a ConfigMap that only shares the policy's name: %+v", resp.Result)
	}
}

// The mutator patches the raw object, and a reinvocation on its own output patches nothing.
// Responses are taken as served (admission.Webhook), with the patch encoded as sent.
func TestMutatorPatchesOnceAndIsIdempotent(t *testing.T) {
	mut, _, _, _, _ := handlers(t)
	wh := serving.Webhook(mut)
	ctx := context.Background()
	p := shadowtest.Pod("trainer", map[string]string{validate.AnnotationReverseForwards: "minio:9000"})
	req := request(t, admissionv1.Create, podGVK, p)
	resp := wh.Handle(ctx, req)
	if !resp.Allowed || len(resp.Patch) == 0 || resp.PatchType == nil {
		t.Fatalf("no patch for a pod asking for the reverse tunnel: %+v", resp)
	}
	decoded, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	mutated, err := decoded.Apply(req.Object.Raw)
	if err != nil {
		t.Fatal(err)
	}
	var out corev1.Pod
	if err := json.Unmarshal(mutated, &out); err != nil {
		t.Fatal(err)
	}
	if out.Annotations[validate.AnnotationReverseBind] == "" || out.Annotations[validate.AnnotationPreExec] == "" {
		t.Fatalf("patched pod lacks bind or pre-exec: %v", out.Annotations)
	}
	again := wh.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req2", Operation: admissionv1.Create, Kind: podGVK, Object: runtime.RawExtension{Raw: mutated},
	}})
	if !again.Allowed || len(again.Patch) != 0 {
		t.Fatalf("reinvocation patched again: %s", again.Patch)
	}

	plain := shadowtest.Pod("web", nil)
	if resp := wh.Handle(ctx, request(t, admissionv1.Create, podGVK, plain)); !resp.Allowed || len(resp.Patch) != 0 {
		t.Fatalf("a pod asking for no reverse tunnel was patched: %s", resp.Patch)
	}
	refused := shadowtest.Pod("bad", map[string]string{validate.AnnotationReverseForwards: "minio:http"})
	if resp := wh.Handle(ctx, request(t, admissionv1.Create, podGVK, refused)); !resp.Allowed || len(resp.Patch) != 0 {
		t.Fatalf("the mutator must leave refusals to /validate-pods: %+v", resp)
	}
}

// Only CREATE applies a shadow; an UPDATE of an admitted pod is judged and nothing more (the
// validator here has no Applier, so reaching it would panic).
func TestPodValidatorAppliesNothingOnUpdate(t *testing.T) {
	_, podV, _, _, _ := handlers(t)
	p := shadowtest.Pod("trainer", map[string]string{validate.AnnotationReverseForwards: "minio:9000"})
	resp := podV.Handle(context.Background(), request(t, admissionv1.Update, podGVK, p))
	if !resp.Allowed {
		t.Fatalf("refused: %+v", resp.Result)
	}
}

// A pod the mutating webhook never saw (skipped, or failing open) is refused at CREATE before
// any shadow is applied: its job would run without the tunnel it asks for.
func TestPodValidatorRefusesAPodTheMutatingWebhookDidNotPrepare(t *testing.T) {
	_, podV, _, _, _ := handlers(t)
	p := shadowtest.Pod("trainer", map[string]string{validate.AnnotationReverseForwards: "minio:9000"})
	got := causes(t, podV.Handle(context.Background(), request(t, admissionv1.Create, podGVK, p)))
	if len(got) != 1 || !strings.HasPrefix(got[0], "metadata.annotations[interlink.eu/reverse-bind]: Required value: ") ||
		!strings.Contains(got[0], "mutating webhook (/mutate-pods) did not run") {
		t.Errorf("causes %q, want the bind address required because the mutating webhook did not run", got)
	}
}

// Undecodable input is a 400, not a decision.
func TestHandlersRefuseUndecodableObjects(t *testing.T) {
	_, podV, _, _, _ := handlers(t)
	resp := podV.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req", Operation: admissionv1.Create, Kind: podGVK, Object: runtime.RawExtension{Raw: []byte(`{"metadata": 7}`)},
	}})
	if resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Fatalf("want a 400, got %+v", resp.Result)
	}
}
