package main

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/interlink-hq/shadowgate/internal/shadows"
)

// gatewayAPIPoll is how often serve asks the API server whether it serves HTTPRoutes.
const gatewayAPIPoll = time.Minute

// errGatewayAPIChanged ends serve, drained as on SIGTERM, once the API server starts or stops
// serving HTTPRoutes: the cache, the collector and admission hold them only as decided at
// start, so the Deployment starts serve again to decide anew.
var errGatewayAPIChanged = errors.New("the API server's Gateway API HTTPRoutes came or went since serve started: serve exits so that its Deployment starts it again with them")

// gatewayAPIWatch asks discovery every period whether the API server serves HTTPRoutes
// (shadows.GatewayAPIServed) and, once the answer differs from served, what serve started
// with, logs so and calls restart with errGatewayAPIChanged. It polls rather than watching
// CustomResourceDefinitions: discovery needs no grant beyond every account's, and says what
// the API server serves, which a CRD just created (not yet established) does not. It runs on
// every replica: each has its own cache and admits pods.
type gatewayAPIWatch struct {
	discover discovery.DiscoveryInterface
	served   bool
	period   time.Duration
	restart  context.CancelCauseFunc
	log      logr.Logger
}

var _ manager.LeaderElectionRunnable = (*gatewayAPIWatch)(nil)

// NeedLeaderElection is false: every replica caches and admits.
func (w *gatewayAPIWatch) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (w *gatewayAPIWatch) Start(ctx context.Context) error {
	t := time.NewTicker(w.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if w.changed() {
				w.restart(errGatewayAPIChanged)
				return nil
			}
		}
	}
}

// changed says whether the API server's answer differs from served; an error is logged and
// changes nothing, as the next period asks again.
func (w *gatewayAPIWatch) changed() bool {
	served, err := shadows.GatewayAPIServed(w.discover)
	switch {
	case err != nil:
		w.log.Error(err, "cannot tell whether the Gateway API is still as at start; asking again", "in", w.period)
		return false
	case served == w.served:
		return false
	case served:
		w.log.Info("RESTARTING: the API server serves Gateway API HTTPRoutes now, which it did not when serve started; serve exits, drained, so that its Deployment starts it again to cache, apply and collect them")
	default:
		w.log.Info("RESTARTING: the API server no longer serves Gateway API HTTPRoutes, which it did when serve started; serve exits, drained, so that its Deployment starts it again without them")
	}
	return true
}
