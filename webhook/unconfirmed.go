package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/interlink-hq/shadowgate/inject"
)

// unconfirmedShadows bounds the shadows this process applies at admission for pods the API
// server has not stored yet. The API server stores a pod moments after /validate-pods admits
// it, so only a few are ever unconfirmed at once; a caller that sends made-up reviews, which
// no pod follows, would otherwise have shadowgate write a shadow, and a namespace and
// credential copies, for each. Past limit, admissions that would apply a shadow are refused
// until stored pods confirm theirs or the unconfirmed ones age out: after the grace period the
// Reconciler deletes a shadow whose pod never came, and it no longer counts.
type unconfirmedShadows struct {
	limit   int
	ttl     time.Duration
	metrics *Metrics
	// now is the clock, time.Now when nil; tests set it.
	now func() time.Time

	mu      sync.Mutex
	pending map[types.UID]time.Time // pod UID: when its shadow was applied
}

func newUnconfirmedShadows(limit int, ttl time.Duration, metrics *Metrics) *unconfirmedShadows {
	return &unconfirmedShadows{limit: limit, ttl: ttl, metrics: metrics, pending: map[types.UID]time.Time{}}
}

func (u *unconfirmedShadows) clock() time.Time {
	if u.now == nil {
		return time.Now()
	}
	return u.now()
}

// reserve counts pod uid's shadow before it is applied, or refuses it when limit shadows
// already wait for their pods. A pod's retried admission takes its own place again.
func (u *unconfirmedShadows) reserve(uid types.UID) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	for id, at := range u.pending {
		if now.Sub(at) >= u.ttl {
			delete(u.pending, id)
		}
	}
	if _, ok := u.pending[uid]; !ok && len(u.pending) >= u.limit {
		u.metrics.unconfirmedRefusals.Inc()
		return &TooManyUnconfirmedError{Limit: u.limit, Within: u.ttl}
	}
	u.pending[uid] = now
	u.metrics.unconfirmed.Set(float64(len(u.pending)))
	return nil
}

// release uncounts pod uid: its pod was stored, or its shadow was not applied.
func (u *unconfirmedShadows) release(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.pending[uid]; ok {
		delete(u.pending, uid)
		u.metrics.unconfirmed.Set(float64(len(u.pending)))
	}
}

// TooManyUnconfirmedError refuses an admission while too many shadows wait for their pods. It
// is a 429, which tells a client to try again, and says what the admin should look at.
type TooManyUnconfirmedError struct {
	Limit  int
	Within time.Duration
}

func (e *TooManyUnconfirmedError) Error() string {
	return fmt.Sprintf("shadowgate has applied %d shadows, its limit (serve --max-unconfirmed-shadows), for pods the API server has not stored within %s; "+
		"admission reviews that no pod follows are reaching the webhook, which the API server does not send: try again in a minute, "+
		"and ask the cluster admin to check who calls shadowgate's webhook port (docs/security.md, \"Who can call the webhook\")", e.Limit, e.Within)
}

// Status makes the refusal a TooManyRequests answer (refuseForShadow keeps the code and reason).
func (e *TooManyUnconfirmedError) Status() metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: e.Error()}
}

// boundedApplier is the admission's ShadowApplier: the Applier, behind the bound. A dry run
// writes nothing and is not counted; the reconciler, re-applying a stored pod's shadow, calls
// the Applier itself.
type boundedApplier struct {
	applier     ShadowApplier
	unconfirmed *unconfirmedShadows
}

var _ ShadowApplier = boundedApplier{}

// Apply implements ShadowApplier.
func (b boundedApplier) Apply(ctx context.Context, s *inject.Shadow, dryRun bool) ([]string, error) {
	if dryRun || s.Deployment == nil {
		return b.applier.Apply(ctx, s, dryRun)
	}
	uid := types.UID(s.Deployment.Labels[inject.LabelPodUID])
	if err := b.unconfirmed.reserve(uid); err != nil {
		return nil, err
	}
	warnings, err := b.applier.Apply(ctx, s, dryRun)
	if err != nil {
		b.unconfirmed.release(uid) // what it created is being removed
	}
	return warnings, err
}
