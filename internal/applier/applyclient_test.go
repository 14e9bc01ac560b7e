package applier

import (
	"context"
	"net/http"
	"testing"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestAnswerRecorder(t *testing.T) {
	for name, c := range map[string]struct {
		marked     bool
		wantAccept string
		wantStatus int
	}{
		"an apply marked for it asks for the metadata only and records the answer's status": {true, metadataOnly, http.StatusCreated},
		"any other request goes as it is, and nothing is recorded":                          {false, "application/json", 0},
	} {
		t.Run(name, func(t *testing.T) {
			var sent string
			rt := answerRecorder{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent = r.Header.Get("Accept")
				return &http.Response{StatusCode: http.StatusCreated}, nil
			})}
			status := 0
			ctx := context.Background()
			if c.marked {
				ctx = withAnswerMetadataOnly(ctx, &status)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPatch, "https://127.0.0.1/apis/apps/v1/namespaces/user-shadow/deployments/trainer-user", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "application/json")
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if sent != c.wantAccept || status != c.wantStatus {
				t.Errorf("sent Accept %q and recorded %d; want %q and %d", sent, status, c.wantAccept, c.wantStatus)
			}
			if got := req.Header.Get("Accept"); got != "application/json" {
				t.Errorf("the caller's request was changed: Accept %q", got)
			}
		})
	}
}
