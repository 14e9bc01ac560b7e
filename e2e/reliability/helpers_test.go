package reliability

import (
	"context"
	"testing"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// audit is harness.Audit of namespace, failing the test if the API server cannot be read.
func audit(ctx context.Context, t *testing.T, namespace string) harness.ShadowAudit {
	t.Helper()
	a, err := harness.Audit(ctx, kube, namespace)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// restartServeIfExited restarts TestMain's serve if it is no longer running, as the kubelet
// would, so later tests never run against a dead one; it reports whether it did.
func restartServeIfExited(t *testing.T) bool {
	t.Helper()
	if cluster.SG.Exited() == nil {
		return false
	}
	if err := cluster.SG.Restart(); err != nil {
		t.Errorf("restarting TestMain's serve: %v", err)
	}
	return true
}
