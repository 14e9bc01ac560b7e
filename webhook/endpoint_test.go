package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/interlink-hq/shadowgate/internal/serving"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// serveReview posts an AdmissionReview body to the handler as the server registers it.
func serveReview(t *testing.T, h admission.Handler, contentType string, body []byte) admissionv1.AdmissionReview {
	t.Helper()
	decisions, err := serving.NewDecisions(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(serving.Route(PathValidatePods, h, decisions))
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
	p := shadowtest.Pod("trainer", map[string]string{validate.AnnotationReverseForwards: "minio:9000"})
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

// What is not an AdmissionReview with an object of the endpoint's kind, as the API server
// writes it, is a 400 saying what is wrong, as controller-runtime answers.
func TestEndpointRefusesWhatItCannotRead(t *testing.T) {
	mut, _, _, _, _ := handlers(t)
	const podKind = `"kind":{"group":"","version":"v1","kind":"Pod"}`
	for name, c := range map[string]struct{ contentType, body, message string }{
		"an empty body": {"application/json", "", "request body is empty"},
		"not JSON":      {"application/json", "{", "couldn't get version/kind; json parse error: unexpected end of JSON input"},
		"another type":  {"text/plain", `{"request":{"uid":"x","object":{}}}`, "contentType=text/plain, expected application/json"},
		"a null object": {"application/json", `{"request":{"uid":"x",` + podKind + `,"object":null}}`, "the admission request holds no object to decode"},
		"a request for a Service": {"application/json", `{"request":{"uid":"x","kind":{"group":"","version":"v1","kind":"Service"},"object":{}}}`,
			`this endpoint judges "Pod" (apiVersion "v1"), but the request is for "Service" (apiVersion "v1"): check the rules of the webhook configuration that sent it`},
		"a Pod request whose object is a Deployment": {"application/json", `{"request":{"uid":"x",` + podKind + `,"object":{"apiVersion":"apps/v1","kind":"Deployment"}}}`,
			`the request is for "Pod" (apiVersion "v1"), but its object says it is "Deployment" (apiVersion "apps/v1")`},
		"an object with a bogus apiVersion": {"application/json", `{"request":{"uid":"x",` + podKind + `,"object":{"apiVersion":"v9","kind":"Pod"}}}`,
			`the request is for "Pod" (apiVersion "v1"), but its object says it is "Pod" (apiVersion "v9")`},
		"an object with a duplicate annotation": {"application/json", `{"request":{"uid":"x",` + podKind + `,"object":{"metadata":{"annotations":{"a":"1","a":"2"}}}}}`,
			`the request's object is not what the API server sends: duplicate field "metadata.annotations.a"`},
		"an object with a duplicate in a field the decision does not read": {"application/json", `{"request":{"uid":"x",` + podKind + `,"object":{"spec":{"containers":[{"name":"c","env":[{"name":"A","name":"B"}]}]}}}}`,
			`the request's object is not what the API server sends: duplicate field "spec.containers.0.env.0.name"`},
		"an admission.k8s.io/v2 review": {"application/json", `{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"x",` + podKind + `,"object":{}}}`,
			`an AdmissionReview of apiVersion "admission.k8s.io/v2" cannot be read: shadowgate reads admission.k8s.io/v1 and v1beta1; list v1 in the webhook configuration's admissionReviewVersions`},
		"a review of another kind than AdmissionReview": {"application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"Banana","request":{"uid":"x",` + podKind + `,"object":{}}}`,
			`a "Banana" of apiVersion "admission.k8s.io/v1" is not an AdmissionReview: shadowgate's endpoints read only kind AdmissionReview, as the API server sends to the webhooks of its webhook configurations`},
		"a kind without an apiVersion that is not AdmissionReview": {"application/json", `{"kind":"Banana","request":{"uid":"x",` + podKind + `,"object":{}}}`,
			`a "Banana" of apiVersion "" is not an AdmissionReview: shadowgate's endpoints read only kind AdmissionReview, as the API server sends to the webhooks of its webhook configurations`},
		"an object that is not a Pod": {"application/json", `{"request":{"uid":"x",` + podKind + `,"object":{"metadata":[]}}}`,
			`the request's object is not a "Pod" (apiVersion "v1"): "/metadata" holds a JSON array where an object belongs`},
		"an object with a port that is not a number": {"application/json", `{"request":{"uid":"x",` + podKind + `,"object":{"spec":{"containers":[{"name":"c","ports":[{"containerPort":"80"}]}]}}}}`,
			`the request's object is not a "Pod" (apiVersion "v1"): "/spec/containers/0/ports/0/containerPort" holds a JSON string where a number belongs`},
	} {
		out := serveReview(t, mut, c.contentType, []byte(c.body))
		if r := out.Response.Result; out.Response.Allowed || r == nil || r.Code != http.StatusBadRequest || r.Message != c.message {
			t.Errorf("%s: want a 400 saying %q, got %+v", name, c.message, out.Response)
		}
	}
}

// /validate-workloads answers a kind other than the six workloads with checkKind's refusal,
// naming what it judges, rather than the scheme's "no kind is registered".
func TestWorkloadEndpointRefusesOtherKinds(t *testing.T) {
	_, _, workV, _, _ := handlers(t)
	body := `{"request":{"uid":"x","kind":{"group":"apps","version":"v1","kind":"Frobnicator"},"object":{}}}`
	want := `this endpoint judges Deployment, StatefulSet, DaemonSet and ReplicaSet (apiVersion apps/v1), Job and CronJob (apiVersion batch/v1), ` +
		`but the request is for "Frobnicator" (apiVersion "apps/v1"): check the rules of the webhook configuration that sent it`
	out := serveReview(t, workV, "application/json", []byte(body))
	if r := out.Response.Result; out.Response.Allowed || r == nil || r.Code != http.StatusBadRequest || r.Message != want {
		t.Errorf("want a 400 saying %q, got %+v", want, out.Response)
	}
}
