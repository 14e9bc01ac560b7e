package webhook

import (
	"context"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// decideBy runs decide, the decision on one request, and returns what it returns, or false
// when ctx (the webhook call's deadline, internal/serving) ends first. validate's caps keep
// a decision short whatever the object holds; this keeps the answer in time even so: one
// that comes after the API server gave up is a timeout in its log, not a message to the user.
// A decision abandoned here runs to its end, bounded by those caps, and is dropped.
func decideBy[T any](ctx context.Context, decide func() T) (T, bool) {
	var zero T
	if ctx.Err() != nil {
		return zero, false
	}
	done := make(chan T, 1)
	go func() { done <- decide() }()
	select {
	case result := <-done:
		return result, true
	case <-ctx.Done():
		return zero, false
	}
}

// tooLate is the answer when the decision did not end within the call's deadline.
func tooLate(ctx context.Context) admission.Response {
	return admission.Errored(http.StatusGatewayTimeout, fmt.Errorf(
		"shadowgate could not decide within the webhook call's deadline (%v); try again, and if it persists the cluster admin should look at shadowgate's CPU use and logs", context.Cause(ctx)))
}
