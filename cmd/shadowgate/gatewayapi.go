package main

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/interlink-hq/shadowgate/internal/shadows"
)

// gatewayAPIPoll is how often serve asks the API server whether it serves HTTPRoutes, give or
// take gatewayAPIJitter of it, so that replicas do not ask together.
const gatewayAPIPoll = time.Minute

// gatewayAPIJitter is the most, as a fraction of the period, added to each wait.
const gatewayAPIJitter = 0.5

// gatewayAPIAnswers is how many answers in a row must differ from serve's start before it
// restarts: a single one may be a passing failure of the API server's aggregation (a 404
// while a CRD is being updated), and every replica would see it at once.
const gatewayAPIAnswers = 2

// errGatewayAPIChanged ends serve, drained as on SIGTERM, once the API server starts or stops
// serving HTTPRoutes: the cache, the collector and admission hold them only as decided at
// start, so the Deployment starts serve again to decide anew.
var errGatewayAPIChanged = errors.New("the API server's Gateway API HTTPRoutes came or went since serve started: serve exits so that its Deployment starts it again with them")

// gatewayAPIWatch asks discovery about every period (jittered) whether the API server serves
// HTTPRoutes (shadows.GatewayAPIServed) and, once gatewayAPIAnswers answers in a row differ
// from served, what serve started with, logs so and calls restart with errGatewayAPIChanged. It polls rather than watching
// CustomResourceDefinitions: discovery needs no grant beyond every account's, and says what
// the API server serves, which a CRD just created (not yet established) does not. It runs on
// every replica: each has its own cache and admits pods.
type gatewayAPIWatch struct {
	discover discovery.DiscoveryInterface
	served   bool
	period   time.Duration
	restart  context.CancelCauseFunc
	log      logr.Logger
	// differing counts the answers in a row that differ from served.
	differing int
}

var _ manager.LeaderElectionRunnable = (*gatewayAPIWatch)(nil)

// NeedLeaderElection is false: every replica caches and admits.
func (w *gatewayAPIWatch) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (w *gatewayAPIWatch) Start(ctx context.Context) error {
	for {
		t := time.NewTimer(wait.Jitter(w.period, gatewayAPIJitter))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
			if w.changed() {
				w.restart(errGatewayAPIChanged)
				return nil
			}
		}
	}
}

// changed says whether the last gatewayAPIAnswers answers of the API server all differ from
// served; an error is logged and is no answer, as the next period asks again.
func (w *gatewayAPIWatch) changed() bool {
	served, err := shadows.GatewayAPIServed(w.discover)
	switch {
	case err != nil:
		w.log.Error(err, "cannot tell whether the Gateway API is still as at start; asking again", "in", w.period)
		return false
	case served == w.served:
		w.differing = 0
		return false
	}
	if w.differing++; w.differing < gatewayAPIAnswers {
		w.log.Info("the API server's Gateway API HTTPRoutes differ from serve's start; asking again before restarting", "servedNow", served, "in", w.period)
		return false
	}
	switch {
	case served:
		w.log.Info("RESTARTING: the API server serves Gateway API HTTPRoutes now, which it did not when serve started; serve exits, drained, so that its Deployment starts it again to cache, apply and collect them")
	default:
		w.log.Info("RESTARTING: the API server no longer serves Gateway API HTTPRoutes, which it did when serve started; serve exits, drained, so that its Deployment starts it again without them")
	}
	return true
}
