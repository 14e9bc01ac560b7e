package serving

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestCallDeadlineFollowsTheAPIServersTimeout(t *testing.T) {
	for query, want := range map[string]time.Duration{
		"?timeout=15s": 15*time.Second - answerMargin,
		"":             defaultCallTimeout - answerMargin,
		"?timeout=bad": defaultCallTimeout - answerMargin,
		"?timeout=1ms": 500 * time.Microsecond, // never less than half the call's time
	} {
		var left time.Duration
		h := withCallDeadline(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			deadline, ok := r.Context().Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			left = time.Until(deadline)
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/validate-pods"+query, nil))
		if left > want || left < want-time.Second/2 {
			t.Errorf("%q: %s left, want about %s", query, left, want)
		}
	}
}

// Shutdown cancels every request's context; the admission in flight goes on to its deadline.
func TestCallDeadlineOutlivesTheRequestsCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var err error
	h := withCallDeadline(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { err = r.Context().Err() }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodPost, "/validate-pods?timeout=10s", nil))
	if err != nil {
		t.Fatalf("the handler's context ended with the request's: %v", err)
	}
}
