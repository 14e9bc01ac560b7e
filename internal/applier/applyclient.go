package applier

import (
	"context"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// answerKey carries, in a request's context, where to record the HTTP status of its answer
// (withAnswerMetadataOnly).
type answerKey struct{}

// withAnswerMetadataOnly marks a request whose answer is read only for its HTTP status, which
// is recorded in status, and its object's metadata, which is all the API server is asked to
// send back (as a PartialObjectMetadata).
func withAnswerMetadataOnly(ctx context.Context, status *int) context.Context {
	return context.WithValue(ctx, answerKey{}, status)
}

// metadataOnly is the Accept header of a request marked withAnswerMetadataOnly. The API
// server answers any apply with the whole object it stored: a shadow's Deployment is most of
// a shadow's bytes, and encoding it (compressed, when large), sending it and decoding it again
// was the largest part of the CPU a shadow cost the API server and shadowgate beyond the
// writes themselves.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// answerRecorder serves requests marked withAnswerMetadataOnly: controller-runtime's client
// says whether an apply succeeded, not whether it created its object, and reading the object
// first to know that cost a round trip per object on every pod's admission.
type answerRecorder struct{ next http.RoundTripper }

func (t answerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	status, ok := req.Context().Value(answerKey{}).(*int)
	if !ok {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change the request it is given
	req.Header.Set("Accept", metadataOnly)
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		*status = resp.StatusCode
	}
	return resp, err
}

// NewClient is the Applier's client: the manager's configuration and connections, with
// applies answered as above, and no cache (it only writes).
func NewClient(mgr manager.Manager) (client.Client, error) {
	hc := *mgr.GetHTTPClient()
	hc.Transport = answerRecorder{next: hc.Transport}
	return client.New(mgr.GetConfig(), client.Options{HTTPClient: &hc, Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
}
