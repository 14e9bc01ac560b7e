package serving

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Each answer is counted once, under its endpoint, by what it says.
func TestEveryAnswerIsCountedByWhatItSays(t *testing.T) {
	refused := func(code int32) admission.Response {
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Result: &metav1.Status{Code: code}}}
	}
	for name, c := range map[string]struct {
		answer admission.Response
		want   string
	}{
		"an admitted object counts as allowed":                      {admission.Allowed(""), resultAllowed},
		"a request that could not be read counts as an error":       {admission.Errored(http.StatusBadRequest, errors.New("not a pod")), resultError},
		"a failure of shadowgate or the API server counts as error": {refused(http.StatusInternalServerError), resultError},
		"a refusal with field paths counts as denied":               {refused(http.StatusUnprocessableEntity), resultDenied},
		"a forbidden shadow counts as denied":                       {refused(http.StatusForbidden), resultDenied},
	} {
		t.Run(name, func(t *testing.T) {
			decisions, err := NewDecisions(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			h := counted("/validate-pods", admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return c.answer }), decisions)
			h.Handle(context.Background(), admission.Request{})
			for _, r := range []string{resultAllowed, resultDenied, resultError} {
				want := 0.0
				if r == c.want {
					want = 1
				}
				if got := testutil.ToFloat64(decisions.counter("/validate-pods", r)); got != want {
					t.Errorf("result %s counted %v times, want %v", r, got, want)
				}
			}
		})
	}
}
