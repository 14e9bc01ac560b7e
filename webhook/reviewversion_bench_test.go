package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/interlink-hq/shadowgate/e2e/bench"
)

// largeReview is the AdmissionReview of bench.LargePod, as the API server sends it.
func largeReview(b testing.TB) []byte {
	req := request(b, admissionv1.Create, podGVK, bench.LargePod("big", "user", false))
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: reviewKind},
		Request:  &req.AdmissionRequest,
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkReviewType compares reviewType with the full parse into a TypeMeta it replaces, on
// a large pod's review.
func BenchmarkReviewType(b *testing.B) {
	body := largeReview(b)
	b.Run("reviewType", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			reviewType(body)
		}
	})
	b.Run("TypeMeta", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var tm metav1.TypeMeta
			_ = kjson.UnmarshalCaseSensitivePreserveInts(body, &tm)
		}
	})
}

// BenchmarkValidatePodsOverHTTP is /validate-pods as the server registers it, an HTTP request
// in and its answer out, with and without withKnownReviewVersion, so the cost of reading the
// review's apiVersion and kind before admission.Webhook reads it again is visible: on a large
// pod too, since that read scans the whole body.
func BenchmarkValidatePodsOverHTTP(b *testing.B) {
	_, podV, _, _, _ := handlers(b)
	for pod, obj := range map[string]any{
		"typical": bench.TypicalPod("notebook", "user", false, false),
		"large":   bench.LargePod("big", "user", false),
	} {
		req := request(b, admissionv1.Create, podGVK, obj)
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: reviewKind},
			Request:  &req.AdmissionRequest,
		})
		if err != nil {
			b.Fatal(err)
		}
		for name, h := range map[string]http.Handler{
			"checked":   withKnownReviewVersion(newWebhook(podV)),
			"unchecked": newWebhook(podV),
		} {
			b.Run(pod+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, PathValidatePods, bytes.NewReader(body)))
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		}
	}
}
