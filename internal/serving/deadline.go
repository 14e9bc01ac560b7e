package serving

import (
	"context"
	"net/http"
	"time"
)

// defaultCallTimeout is the API server's own default for a webhook call without timeoutSeconds.
const defaultCallTimeout = 10 * time.Second

// answerMargin is kept back from the API server's timeout to send the answer in: a denial
// that arrives after the API server gave up is a failurePolicy error, not a field path.
const answerMargin = 500 * time.Millisecond

// withCallDeadline bounds a handler, and every API call it makes, by the time the API server
// allows the webhook call. The API server sends that as the timeout query parameter; it does
// not reach the request's context on its own. The request's own cancellation is not passed
// on: controller-runtime cancels every request's context when shutdown begins, and an
// admission in flight is to finish, not to fail half-applied.
func withCallDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timeout := defaultCallTimeout
		if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
			timeout = d
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), max(timeout-answerMargin, timeout/2))
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
