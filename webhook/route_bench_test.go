package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/internal/serving"
)

// BenchmarkValidatePodsOverHTTP is /validate-pods as the server registers it (serving.Route),
// an HTTP request in and its answer out, beside the handler in admission.Webhook alone, so the
// cost of the route's plumbing, reading the review's apiVersion and kind before
// admission.Webhook reads it again most of all, is visible: on a large pod too, since that
// read scans the whole body.
func BenchmarkValidatePodsOverHTTP(b *testing.B) {
	_, podV, _, _, _ := handlers(b)
	decisions, err := serving.NewDecisions(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	for pod, obj := range map[string]any{
		"typical": bench.TypicalPod("notebook", "user", false, false),
		"large":   bench.LargePod("big", "user", false),
	} {
		req := request(b, admissionv1.Create, podGVK, obj)
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Request:  &req.AdmissionRequest,
		})
		if err != nil {
			b.Fatal(err)
		}
		for name, h := range map[string]http.Handler{
			"routed":  serving.Route(PathValidatePods, podV, decisions),
			"handler": serving.Webhook(podV),
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
