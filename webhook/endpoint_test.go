package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/validate"
)

// serveReview posts an AdmissionReview body to the handler as the server registers it.
func serveReview(t *testing.T, h admission.Handler, contentType string, body []byte) admissionv1.AdmissionReview {
	t.Helper()
	srv := httptest.NewServer(newWebhook(h))
	defer srv.Close()
	resp, err := http.Post(srv.URL, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil {
		t.Fatal("no response in the AdmissionReview")
	}
	return out
}

// Over HTTP the pod is read with the review, the answer is an AdmissionReview of the version
// asked in with the request's UID, and the patch applies to the object as sent.
func TestEndpointAnswersInTheRequestsVersion(t *testing.T) {
	mut, _, _, _, _ := handlers(t)
	p := pod("trainer", map[string]string{validate.AnnotationReverseForwards: "minio:9000"})
	for _, version := range []string{"admission.k8s.io/v1", "admission.k8s.io/v1beta1"} {
		req := request(t, admissionv1.Create, podGVK, p)
		body, err := json.Marshal(admissionv1.AdmissionReview{Request: &req.AdmissionRequest})
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.Replace(body, []byte(`{`), []byte(`{"apiVersion":"`+version+`","kind":"AdmissionReview",`), 1)
		out := serveReview(t, mut, "application/json", body)
		if out.APIVersion != version || out.Kind != "AdmissionReview" || out.Response.UID != req.UID {
			t.Errorf("%s: answered %s %s for request %q", version, out.APIVersion, out.Kind, out.Response.UID)
		}
		if !out.Response.Allowed || out.Response.PatchType == nil {
			t.Fatalf("%s: no patch: %+v", version, out.Response)
		}
		if got := patched(t, req.Object.Raw, out.Response.Patch); got.Annotations[validate.AnnotationReverseBind] == "" {
			t.Errorf("%s: the patch records no bind address: %v", version, got.Annotations)
		}
	}
}

// What is not an AdmissionReview with an object is a 400, as controller-runtime answers.
func TestEndpointRefusesWhatItCannotRead(t *testing.T) {
	mut, _, _, _, _ := handlers(t)
	for name, c := range map[string]struct{ contentType, body string }{
		"not JSON":      {"application/json", "{"},
		"another type":  {"text/plain", `{"request":{"uid":"x","object":{}}}`},
		"a null object": {"application/json", `{"request":{"uid":"x","object":null}}`},
	} {
		out := serveReview(t, mut, c.contentType, []byte(c.body))
		if out.Response.Allowed || out.Response.Result == nil || out.Response.Result.Code != http.StatusBadRequest {
			t.Errorf("%s: want a 400, got %+v", name, out.Response)
		}
	}
}
