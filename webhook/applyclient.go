package webhook

import (
	"context"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// statusKey carries, in a request's context, where to record the HTTP status of its answer.
type statusKey struct{}

func withStatusRecorded(ctx context.Context, status *int) context.Context {
	return context.WithValue(ctx, statusKey{}, status)
}

// statusRecorder records the HTTP status of each answer whose request asks for it
// (withStatusRecorded): controller-runtime's client says whether an apply succeeded, not
// whether it created its object, and reading the object first to know that cost a round
// trip per object on every pod's admission.
type statusRecorder struct{ next http.RoundTripper }

func (t statusRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if status, ok := req.Context().Value(statusKey{}).(*int); ok && err == nil {
		*status = resp.StatusCode
	}
	return resp, err
}

// newApplyClient is the Applier's client: the manager's configuration and connections, with
// statuses recorded, and no cache (it only writes).
func newApplyClient(mgr manager.Manager) (client.Client, error) {
	hc := *mgr.GetHTTPClient()
	hc.Transport = statusRecorder{next: hc.Transport}
	return client.New(mgr.GetConfig(), client.Options{HTTPClient: &hc, Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
}
