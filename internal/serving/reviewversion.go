package serving

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// maxReviewSize is controller-runtime's limit on a request body (admission/http.go): a longer
// body is read here only up to one byte past it, not parsed, and left to admission.Webhook,
// which answers it with a 413 itself.
const maxReviewSize = 7 << 20

// reviewKind is the only kind an admission endpoint reads; a review that states no kind is let
// through, as controller-runtime reads it as one.
const reviewKind = "AdmissionReview"

// withKnownReviewVersion answers a 400 to an AdmissionReview of an apiVersion other than
// admission.k8s.io/v1 and v1beta1, or of a kind other than AdmissionReview. controller-runtime's
// decoder reads any apiVersion and kind into its v1 type and answers in the version asked, so
// an admission.k8s.io/v2 review, or a "Banana", would be judged as a v1 review and answered in
// a version no API server defines. Anything else, a body that is not JSON or too long included,
// goes on to admission.Webhook, which answers it.
//
// The body is read twice, here for its type and there for the review. JSON puts no order on
// keys, so finding apiVersion and kind still passes over the whole body, but reviewType only
// finds where each value ends instead of parsing it (BenchmarkReviewType compares the two).
func withKnownReviewVersion(next http.Handler) http.Handler {
	known := map[string]bool{admissionv1.SchemeGroupVersion.String(): true, admissionv1beta1.SchemeGroupVersion.String(): true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		body, err := readBody(r)
		switch {
		case err == nil && len(body) == 0:
			// admission.Webhook refuses an empty body by this sentinel; read as JSON, it
			// would be an empty review.
			r.Body = http.NoBody
		case err == nil && len(body) <= maxReviewSize:
			r.Body = struct {
				io.Reader
				io.Closer
			}{bytes.NewReader(body), r.Body}
		default:
			// Cut short by an error or by the limit: what was read, then whatever is left.
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		}
		if err != nil || len(body) > maxReviewSize {
			next.ServeHTTP(w, r)
			return
		}
		apiVersion, kind, ok := reviewType(body)
		var why error
		switch {
		case !ok:
			next.ServeHTTP(w, r)
			return
		case apiVersion != "" && !known[apiVersion]:
			why = fmt.Errorf("an AdmissionReview of apiVersion %q cannot be read: shadowgate reads admission.k8s.io/v1 and v1beta1; "+
				"list v1 in the webhook configuration's admissionReviewVersions", apiVersion)
		case kind != "" && kind != reviewKind:
			why = fmt.Errorf("a %q of apiVersion %q is not an AdmissionReview: shadowgate's endpoints read only kind AdmissionReview, "+
				"as the API server sends to the webhooks of its webhook configurations", kind, apiVersion)
		default:
			next.ServeHTTP(w, r)
			return
		}
		answer := admission.Errored(http.StatusBadRequest, why)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{ // a failed write is the client gone
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: reviewKind},
			Response: &answer.AdmissionResponse,
		})
	})
}

// readBody reads a request body up to one byte past maxReviewSize. The API server says the
// body's length, so it is read into one buffer of that size rather than a growing one, which
// cost as much as the rest of the check.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength < 0 || r.ContentLength > maxReviewSize {
		return io.ReadAll(io.LimitReader(r.Body, maxReviewSize+1))
	}
	// One byte more than announced, to see a body longer than its Content-Length.
	body := make([]byte, r.ContentLength+1)
	n, err := io.ReadFull(r.Body, body)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return body[:n], err
}
