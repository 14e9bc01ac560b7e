package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/shadows"
)

// unconfirmedShadows bounds the shadows this process applies at admission for pods the API
// server has not stored yet. The API server stores a pod moments after /validate-pods admits
// it, so only a few are ever unconfirmed at once; a caller that sends made-up reviews, which
// no pod follows, or a tenant whose pods a later admission step refuses (a ResourceQuota runs
// after the webhooks), would otherwise have shadowgate write a shadow, and a namespace and
// credential copies, for each. Past limit, or past perNamespace for the pod's namespace, such
// admissions are refused until stored pods confirm theirs or the unconfirmed ones age out:
// after the grace period the Reconciler deletes a shadow whose pod never came, and it no
// longer counts. The share keeps one namespace from taking every place.
type unconfirmedShadows struct {
	limit, perNamespace int
	ttl                 time.Duration
	metrics             *metrics.Metrics
	// now is the clock, time.Now when nil; tests set it.
	now func() time.Time

	mu      sync.Mutex
	pending map[types.UID]pendingShadow
	// held counts pending by namespace; a namespace holding none is not in it.
	held map[string]int
}

// pendingShadow is a shadow applied for a pod not stored yet: the pod's namespace, and when.
type pendingShadow struct {
	namespace string
	at        time.Time
}

func newUnconfirmedShadows(limit, perNamespace int, ttl time.Duration, metrics *metrics.Metrics) *unconfirmedShadows {
	return &unconfirmedShadows{limit: limit, perNamespace: perNamespace, ttl: ttl, metrics: metrics,
		pending: map[types.UID]pendingShadow{}, held: map[string]int{}}
}

func (u *unconfirmedShadows) clock() time.Time {
	if u.now == nil {
		return time.Now()
	}
	return u.now()
}

// reserve counts the shadow of pod uid, of namespace, before it is applied, or refuses it when
// namespace holds its share, or limit shadows already wait for their pods. A pod's retried
// admission takes its own place again.
func (u *unconfirmedShadows) reserve(uid types.UID, namespace string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	for id, p := range u.pending {
		if now.Sub(p.at) >= u.ttl {
			u.drop(id)
		}
	}
	if p, ok := u.pending[uid]; ok {
		u.pending[uid] = pendingShadow{namespace: p.namespace, at: now}
		return nil
	}
	switch {
	case u.held[namespace] >= u.perNamespace:
		u.metrics.UnconfirmedRefusals.Inc()
		return &TooManyUnconfirmedError{Namespace: namespace, Held: u.held[namespace], Limit: u.perNamespace, Share: true, Within: u.ttl}
	case len(u.pending) >= u.limit:
		u.metrics.UnconfirmedRefusals.Inc()
		most, held := u.most()
		return &TooManyUnconfirmedError{Namespace: most, Held: held, Limit: u.limit, Within: u.ttl}
	}
	u.pending[uid] = pendingShadow{namespace: namespace, at: now}
	u.held[namespace]++
	u.metrics.Unconfirmed.Set(float64(len(u.pending)))
	return nil
}

// most is the namespace holding the most places, and how many (the first by name of equals).
func (u *unconfirmedShadows) most() (namespace string, held int) {
	for ns, n := range u.held {
		if n > held || (n == held && ns < namespace) {
			namespace, held = ns, n
		}
	}
	return namespace, held
}

// release uncounts pod uid: its pod was stored, or its shadow was not applied.
func (u *unconfirmedShadows) release(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.drop(uid)
}

// drop uncounts pod uid; u.mu is held.
func (u *unconfirmedShadows) drop(uid types.UID) {
	p, ok := u.pending[uid]
	if !ok {
		return
	}
	delete(u.pending, uid)
	if u.held[p.namespace]--; u.held[p.namespace] <= 0 {
		delete(u.held, p.namespace)
	}
	u.metrics.Unconfirmed.Set(float64(len(u.pending)))
}

// TooManyUnconfirmedError refuses an admission while too many shadows wait for their pods:
// Namespace's share is full (Share), or the replica's limit is, Namespace holding the most. It
// is a 429, which tells a client to try again, and names the namespace whose pods to look at.
type TooManyUnconfirmedError struct {
	Namespace string
	Held      int
	Limit     int
	Share     bool
	Within    time.Duration
}

func (e *TooManyUnconfirmedError) Error() string {
	held := fmt.Sprintf("shadowgate has applied %d shadows, its limit (serve --max-unconfirmed-shadows), for pods the API server has not stored within %s; namespace %q holds %d of them",
		e.Limit, e.Within, e.Namespace, e.Held)
	if e.Share {
		held = fmt.Sprintf("namespace %q holds %d shadows, its share (serve --max-unconfirmed-shadows-per-namespace), applied for pods the API server has not stored within %s",
			e.Namespace, e.Held, e.Within)
	}
	return fmt.Sprintf("%s: pods shadowgate admitted there were refused by a later admission step (most often the namespace's ResourceQuota: kubectl describe resourcequota -n %q), "+
		"or admission reviews that no pod follows reach the webhook (docs/security.md, \"Who can call the webhook\"). "+
		"Try again once those pods are stored or %s has passed, when their shadows no longer count", held, e.Namespace, e.Within)
}

// Status makes the refusal a TooManyRequests answer (refuseForShadow keeps the code and reason).
func (e *TooManyUnconfirmedError) Status() metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: e.Error()}
}

// boundedApplier is the admission's ShadowApplier: the Applier, behind the bound, applying
// the shadow Deployment with no replicas (applier.LabelAwaitingPod). A dry run writes nothing and is
// not counted; the reconciler, re-applying a stored pod's shadow, calls the Applier itself.
type boundedApplier struct {
	applier     applier.ShadowApplier
	unconfirmed *unconfirmedShadows
}

var _ applier.ShadowApplier = boundedApplier{}

// Apply implements ShadowApplier.
func (b boundedApplier) Apply(ctx context.Context, s *inject.Shadow, dryRun bool) ([]string, error) {
	if dryRun || s.Deployment == nil {
		return b.applier.Apply(ctx, s, dryRun)
	}
	uid := types.UID(s.Deployment.Labels[inject.LabelPodUID])
	podNamespace, _, _ := shadows.SplitKey(s.Deployment.Annotations[inject.AnnotationShadowFor])
	if err := b.unconfirmed.reserve(uid, podNamespace); err != nil {
		return nil, err
	}
	held := *s
	held.Deployment = s.Deployment.DeepCopy()
	held.Deployment.Spec.Replicas = ptr.To[int32](0)
	metav1.SetMetaDataLabel(&held.Deployment.ObjectMeta, applier.LabelAwaitingPod, "true")
	warnings, err := b.applier.Apply(ctx, &held, dryRun)
	if err != nil {
		b.unconfirmed.release(uid) // what it created is being removed
	}
	return warnings, err
}
