package serving

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"

	"github.com/interlink-hq/shadowgate/e2e/bench"
)

// largeReview is the AdmissionReview of bench.LargePod, as the API server sends it.
func largeReview(b testing.TB) []byte {
	pod, err := json.Marshal(bench.LargePod("big", "user", false))
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: reviewKind},
		Request: &admissionv1.AdmissionRequest{UID: "req", Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: pod}},
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
