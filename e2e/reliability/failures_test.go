package reliability

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// webhookCallFailed is the start of the API server's message when it cannot get an answer
// from a webhook whose failurePolicy is Fail: the pod is not stored, and the client may retry.
const webhookCallFailed = "failed calling webhook"

// connectionErrors are how a webhook call ends when the replica it went to is killed: the
// connection it was on, or the one the balancer was opening to it, ends under it.
var connectionErrors = []string{"EOF", "connection refused", "connection reset", "broken pipe"}

// timeoutErrors are how a webhook call ends when no answer came within the webhook's timeout.
var timeoutErrors = []string{"context deadline exceeded", "Client.Timeout exceeded", "i/o timeout"}

// unexplained returns why a create's failure is not explained by a replica killed at killed
// and taken out of the balancer at removed, or "" if it is: the API server's webhook call
// error, for a create in flight at some time between the two, ending in a connection error,
// or in a timeout while timeouts (one: the call the kill caught mid-read) is above zero,
// which it then lowers.
func unexplained(f failure, killed, removed time.Time, timeouts *int) string {
	msg := f.err.Error()
	switch {
	case !strings.Contains(msg, webhookCallFailed):
		return "not the API server's " + webhookCallFailed
	case f.failed.Before(killed) || f.sent.After(removed):
		return "outside the time the killed replica was in the balancer"
	case containsAny(msg, connectionErrors):
		return ""
	case containsAny(msg, timeoutErrors) && *timeouts > 0:
		*timeouts--
		return ""
	default:
		return "neither a connection error nor the one webhook timeout allowed"
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Only the API server's webhook call errors that end in a connection error, or in the one
// timeout allowed, and that were in flight while the killed replica was in the balancer, are
// explained.
func TestUnexplainedAcceptsOnlyConnectionErrorsWhileTheKilledReplicaWasInTheBalancer(t *testing.T) {
	killed := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	removed := killed.Add(5 * time.Second)
	call := func(end string) error {
		return errors.New(`Internal error occurred: failed calling webhook "pods.shadowgate.interlink.eu": failed to call webhook: Post "https://127.0.0.1:1/validate-pods?timeout=15s": ` + end)
	}
	during, before, after := killed.Add(time.Second), killed.Add(-time.Second), removed.Add(time.Second)
	for _, c := range []struct {
		name      string
		f         failure
		explained bool
	}{
		{"EOF at the kill", failure{sent: before, failed: during, err: call("EOF")}, true},
		{"refused while in the balancer", failure{sent: during, failed: during, err: call("dial tcp: connect: connection refused")}, true},
		{"reset", failure{sent: during, failed: during, err: call("read: connection reset by peer")}, true},
		{"broken pipe", failure{sent: during, failed: after, err: call("write: broken pipe")}, true},
		{"the one timeout", failure{sent: during, failed: during, err: call("context deadline exceeded")}, true},
		{"a second timeout", failure{sent: during, failed: during, err: call("context deadline exceeded")}, false},
		{"failed before the kill", failure{sent: before, failed: before, err: call("EOF")}, false},
		{"sent after the removal", failure{sent: after, failed: after, err: call("EOF")}, false},
		{"shadowgate's own denial", failure{sent: during, failed: during, err: errors.New(`admission webhook "pods.shadowgate.interlink.eu" denied the request: ` +
			`the pod's shadow was not applied, so the pod is refused: applying Deployment crash-shadow/x: unexpected EOF`)}, false},
		{"not a webhook call", failure{sent: during, failed: during, err: errors.New("etcdserver: request timed out")}, false},
	} {
		timeouts := 1
		if c.name == "a second timeout" {
			timeouts = 0
		}
		if why := unexplained(c.f, killed, removed, &timeouts); (why == "") != c.explained {
			t.Errorf("%s: explained %v (%q), want %v", c.name, why == "", why, c.explained)
		}
	}
}
