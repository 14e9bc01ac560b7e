package webhook

import (
	"context"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// inlineBelow is the size, in bytes of the request's object, under which a decision runs on
// the request's own goroutine: validate's caps keep the decision on such an object far under
// a millisecond (the 66 KB pod of BenchmarkMutatePods takes about half of one), well inside
// the margin serve keeps from the call's deadline, and handing it to another goroutine costs
// more than the decision of a typical pod (issue 35: 4.8 of 16 µs on two cores).
const inlineBelow = 64 << 10

// decideBy runs decide, the decision on one request whose object is size bytes, and returns
// what it returns, or false when ctx (the webhook call's deadline, internal/serving) ends
// first. validate's caps keep a decision short whatever the object holds; this keeps the
// answer in time even so: one that comes after the API server gave up is a timeout in its
// log, not a message to the user. Under inlineBelow the decision runs here and a deadline that
// passed meanwhile still gets false; above it, it runs on its own goroutine and is not waited
// for past the deadline: abandoned, it runs to its end, bounded by those caps, and is dropped.
func decideBy[T any](ctx context.Context, size int, decide func() T) (T, bool) {
	var zero T
	if ctx.Err() != nil {
		return zero, false
	}
	if size < inlineBelow {
		result := decide()
		if ctx.Err() != nil {
			return zero, false
		}
		return result, true
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
