package harness

import (
	"context"
	"testing"
	"time"
)

// TestContext is a context that ends with the test or after timeout, whichever comes first.
func TestContext(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
