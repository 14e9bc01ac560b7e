package serving

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Route is how every admission endpoint is served: h decides, wrapped in controller-runtime's
// admission.Webhook (decoding the review, bounding its body, encoding the answer), with the
// request logger, the decision counted under endpoint, the review's type checked before it is
// decoded, and the API server's deadline on the whole call.
func Route(endpoint string, h admission.Handler, decisions *Decisions) http.Handler {
	return withCallDeadline(withKnownReviewVersion(Webhook(counted(endpoint, h, decisions))))
}

// Webhook wraps a handler in admission.Webhook with the request logger; Route serves it, and
// benchmarks call it to measure a handler without the rest of Route.
func Webhook(h admission.Handler) *admission.Webhook {
	return &admission.Webhook{Handler: h, LogConstructor: requestLogger}
}

// Decisions counts admission decisions by endpoint and result.
type Decisions struct{ total *prometheus.CounterVec }

// Results of a decision, the values of the result label.
const (
	resultAllowed = "allowed"
	resultDenied  = "denied"
	resultError   = "error"
)

// NewDecisions creates the counter and registers it with reg (controller-runtime's
// metrics.Registry when serving).
func NewDecisions(reg prometheus.Registerer) (*Decisions, error) {
	d := &Decisions{total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shadowgate_admission_decisions_total",
		Help: "Admission decisions by endpoint and result: allowed, denied, or error (a request that could not be read, or a failure of shadowgate or the API server).",
	}, []string{"endpoint", "result"})}
	return d, reg.Register(d.total)
}

// counter is the count of endpoint's decisions of result.
func (d *Decisions) counter(endpoint, result string) prometheus.Counter {
	return d.total.WithLabelValues(endpoint, result)
}

// result classifies an answer: allowed; error when the request could not be read (400) or
// the answer is a failure of shadowgate or of the API server it called (5xx); denied otherwise.
func result(resp admission.Response) string {
	switch {
	case resp.Allowed:
		return resultAllowed
	case resp.Result != nil && (resp.Result.Code == http.StatusBadRequest || resp.Result.Code >= http.StatusInternalServerError):
		return resultError
	}
	return resultDenied
}

// counted is h with each of its answers counted.
func counted(endpoint string, h admission.Handler, decisions *Decisions) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		resp := h.Handle(ctx, req)
		decisions.counter(endpoint, result(resp)).Inc()
		return resp
	})
}
