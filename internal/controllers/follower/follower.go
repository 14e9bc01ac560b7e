package follower

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/eventnote"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// The follower's bound: past a burst of followBurst, copies are checked at followRate a
// second on the leader, so a source mounted in M shadow namespaces is followed by all its
// copies about (M-followBurst)/followRate seconds after its change reaches the cache: 4 to
// 5 seconds for 100 namespaces, which docs/security.md states as within 10 seconds and the
// e2e TestCopiesFollowTheirSourceWithinTheBound measures. Each check is one uncached read of
// the copy, and a write only when it differs.
const (
	followRate    = 20
	followBurst   = 20
	followWorkers = 2
	// refusedRecheck is how often a copy that cannot follow is looked at again, so that once
	// an admin deletes it, as its Event says, the copy is made again without a pod or a
	// change of the source to bring it: one read a period per such copy.
	refusedRecheck = 30 * time.Second
)

// indexMounts indexes cached shadow Deployments by the credentials they mount
// ("Secret/<name>", "ConfigMap/<name>": mountedCredentials).
const indexMounts = "mountedCredential"

// ReasonCopyNotFollowing: on a credential source, a copy of it that cannot take its new
// content (someone else's object, an immutable copy, a changed Secret type).
const ReasonCopyNotFollowing = "CopyNotFollowing"

// copyKey names one credential copy: the follower's unit of work.
type copyKey struct{ Namespace, Kind, Name string }

func (k copyKey) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

func (k copyKey) credential() inject.Credential {
	return inject.Credential{Kind: k.Kind, Name: k.Name, Namespace: k.Namespace}
}

// CredentialFollower is the follower of the package doc.
type CredentialFollower struct {
	shadows              client.Reader // the manager's cache: shadow Deployments, indexed by indexMounts
	identity             shadows.Identity
	sources              applier.ObjectGetter // applier.CredentialSources
	applier              *applier.Applier
	policies             policystore.Policies
	credentialsNamespace string
	recorder             events.EventRecorder
	metrics              *metrics.Metrics
	limiter              *rate.Limiter

	mu sync.Mutex
	// refusals holds, per copy that cannot follow, the refusal last said, so a recheck that
	// finds the same says nothing again.
	refusals map[copyKey]string
}

// New is the follower of the copies of credentialsNamespace's sources, which it reads through
// sources, copying with applier; shadowCache is the manager's cache.
func New(shadowCache client.Reader, identity shadows.Identity, sources *applier.CredentialSources, copier *applier.Applier, policies policystore.Policies, credentialsNamespace string, recorder events.EventRecorder, metrics *metrics.Metrics) *CredentialFollower {
	return &CredentialFollower{shadows: shadowCache, identity: identity, sources: sources, applier: copier, policies: policies,
		credentialsNamespace: credentialsNamespace, recorder: recorder, metrics: metrics}
}

// SetupWithManager indexes shadow Deployments by what they mount and starts the follower on
// the leader, watching the sources in sourceCache and the shadow Deployments in mgr's cache.
func (f *CredentialFollower) SetupWithManager(ctx context.Context, mgr manager.Manager, sourceCache cache.Cache) error {
	f.limiter = rate.NewLimiter(followRate, followBurst)
	f.refusals = map[copyKey]string{}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &networkingv1.Ingress{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, indexMounts, shadows.UsedCredentials); err != nil {
			return err
		}
	}
	return builder.TypedControllerManagedBy[copyKey](mgr).Named("credential-copies").
		WatchesRawSource(source.TypedKind(sourceCache, &corev1.Secret{}, sourceEvents[*corev1.Secret](f))).
		WatchesRawSource(source.TypedKind(sourceCache, &corev1.ConfigMap{}, sourceEvents[*corev1.ConfigMap](f))).
		WatchesRawSource(source.TypedKind(mgr.GetCache(), &appsv1.Deployment{}, userEvents[*appsv1.Deployment](f))).
		WatchesRawSource(source.TypedKind(mgr.GetCache(), &networkingv1.Ingress{}, userEvents[*networkingv1.Ingress](f))).
		WithOptions(controller.TypedOptions[copyKey]{MaxConcurrentReconciles: followWorkers}).
		Complete(f)
}

// userEvents queues the copies a shadow Deployment or Ingress comes to use. Its status changes
// all the time; only a template mounting more, or TLS naming more, matters.
func userEvents[T client.Object](f *CredentialFollower) handler.TypedEventHandler[T, copyKey] {
	return handler.TypedFuncs[T, copyKey]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[copyKey]) {
			f.enqueue(ctx, q, mountedCopies(e.Object, nil, f.replicated(), f.credentialsNamespace))
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[copyKey]) {
			f.enqueue(ctx, q, mountedCopies(e.ObjectNew, e.ObjectOld, f.replicated(), f.credentialsNamespace))
		},
	}
}

// users lists the cached shadow Deployments and Ingresses that use the credential mount
// ("<Kind>/<name>"), with opts; read only, the cache's own objects.
func (f *CredentialFollower) users(ctx context.Context, mount string, opts ...client.ListOption) ([]client.Object, error) {
	var out []client.Object
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &networkingv1.IngressList{}} {
		if err := f.shadows.List(ctx, list, append(opts, client.MatchingFields{indexMounts: mount}, client.UnsafeDisableDeepCopy)...); err != nil {
			return nil, err
		}
		err := apimeta.EachListItem(list, func(o runtime.Object) error {
			out = append(out, o.(client.Object))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sourceEvents queues the copies of a source that is created (at start, or made again) or
// whose content changed; a change of its metadata alone changes no copy.
func sourceEvents[T client.Object](f *CredentialFollower) handler.TypedEventHandler[T, copyKey] {
	return handler.TypedFuncs[T, copyKey]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[copyKey]) {
			f.sourceChanged(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[copyKey]) {
			if !applier.SameContent(e.ObjectOld, e.ObjectNew) {
				f.sourceChanged(ctx, e.ObjectNew, q)
			}
		},
	}
}

func (f *CredentialFollower) sourceChanged(ctx context.Context, src client.Object, q workqueue.TypedRateLimitingInterface[copyKey]) {
	mount := applier.CredentialKind(src) + "/" + src.GetName()
	if !f.replicated()[mount] {
		return
	}
	// Read only: the cache's objects themselves, not a copy of every Deployment mounting it.
	users, err := f.users(ctx, mount)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the shadow Deployments and Ingresses that use a changed credential; its copies follow it at the next change", "source", f.credentialsNamespace+"/"+src.GetName())
		return
	}
	f.enqueue(ctx, q, copiesOf(users, mount, f.credentialsNamespace))
}

// enqueue queues the keys that are places for copies; one whose place cannot be told now is
// queued too, and Reconcile asks again.
func (f *CredentialFollower) enqueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[copyKey], keys []copyKey) {
	for _, k := range keys {
		if ok, err := f.identity.MayHoldCopy(ctx, k.credential()); ok || err != nil {
			q.Add(k)
		}
	}
}

// replicated are the credentials the policy in force copies.
func (f *CredentialFollower) replicated() map[string]bool {
	return replicatedSources(f.policies.Current())
}

// replicatedSources are the credentials pol copies into shadow namespaces ("<Kind>/<name>"),
// of every virtual node that replicates them; nil without a policy.
func replicatedSources(pol *policy.Policy) map[string]bool {
	if pol == nil {
		return nil
	}
	out := map[string]bool{}
	for _, node := range pol.VirtualNodes {
		for _, c := range inject.Credentials(&node.Network, "") {
			out[c.Kind+"/"+c.Name] = true
		}
	}
	return out
}

// copiesOf are the copies of the credential mount ("<Kind>/<name>") that users (shadow
// Deployments and Ingresses) need, one per namespace other than the credentials namespace,
// where the shadows use the source itself.
func copiesOf(users []client.Object, mount, credentialsNamespace string) []copyKey {
	kind, name, _ := strings.Cut(mount, "/")
	var out []copyKey
	for _, d := range users {
		k := copyKey{Namespace: d.GetNamespace(), Kind: kind, Name: name}
		if d.GetNamespace() != credentialsNamespace && !slices.Contains(out, k) && slices.Contains(shadows.UsedCredentials(d), mount) {
			out = append(out, k)
		}
	}
	return out
}

// mountedCopies are the copies of replicated credentials that d (a shadow Deployment or
// Ingress) uses and old (nil: none) did not, outside the credentials namespace.
func mountedCopies(d, old client.Object, replicated map[string]bool, credentialsNamespace string) []copyKey {
	if d.GetNamespace() == credentialsNamespace {
		return nil
	}
	var before []string
	if old != nil {
		before = shadows.UsedCredentials(old)
	}
	var out []copyKey
	for _, m := range shadows.UsedCredentials(d) {
		if !replicated[m] || slices.Contains(before, m) {
			continue
		}
		kind, name, _ := strings.Cut(m, "/")
		if k := (copyKey{Namespace: d.GetNamespace(), Kind: kind, Name: name}); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Reconcile brings one copy up to date with its source, if its namespace is a place for it
// (identity) and a shadow there still mounts it under the policy in force: an unused copy is
// the Collector's, and one anywhere else is not shadowgate's and is not even read.
func (f *CredentialFollower) Reconcile(ctx context.Context, k copyKey) (reconcile.Result, error) {
	mount := k.Kind + "/" + k.Name
	// Whether one shadow still uses the copy is all this asks: one of each kind, uncopied.
	// Every new shadow Deployment of a namespace comes here, so a copy of each Deployment of
	// the namespace per reconcile would cost in the square of its shadows.
	users, err := f.users(ctx, mount, client.InNamespace(k.Namespace), client.Limit(1))
	if err != nil {
		return reconcile.Result{}, err
	}
	owned := false
	if f.replicated()[mount] && len(users) > 0 {
		var err error
		if owned, err = f.identity.MayHoldCopy(ctx, k.credential()); err != nil {
			return reconcile.Result{}, err
		}
	}
	if !owned {
		f.forgetRefusal(k)
		return reconcile.Result{}, nil
	}
	if err := f.limiter.Wait(ctx); err != nil {
		return reconcile.Result{}, nil // stopping
	}
	logger := log.FromContext(ctx).WithValues("copy", k.String(), "source", f.credentialsNamespace+"/"+k.Name)
	// A missing copy is admission's to create, under the policy the pod was admitted by; the
	// follower makes one again only where it said a copy could not follow, as its remedy is
	// to delete that copy.
	action, err := f.applier.CopyCredential(ctx, k.credential(), false, f.saidRefused(k))
	if err == nil {
		f.forgetRefusal(k)
	}
	switch {
	case action == applier.CopyRefused || action == applier.CopyStuck:
		f.refused(ctx, k, action, err)
		return reconcile.Result{RequeueAfter: refusedRecheck}, nil
	case apierrors.IsNotFound(err):
		// The source is gone: copies keep what they hold, and admissions say it is missing.
		logger.Info("the source of a credential copy is gone; the copy keeps its content")
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, err
	case action == applier.CopyCreate:
		f.metrics.CopiesFollowed.WithLabelValues(k.Kind, metrics.FollowCreated).Inc()
		logger.Info("made a credential copy again, deleted after it could not follow")
	case action == applier.CopyOverwrite || action == applier.CopyAdopt:
		f.metrics.CopiesFollowed.WithLabelValues(k.Kind, metrics.FollowUpdated).Inc()
		logger.Info("updated a credential copy to its source's content")
	}
	return reconcile.Result{}, nil
}

// refused says that the copy k cannot follow its source, and what to do: a Warning Event on
// the source, a log line and the metric, once per version of the source (a recheck that finds
// the same says nothing again). refusal is decideCopy's error; a copy that is someone else's
// object (applier.CopyRefused) is theirs to delete, which its message does not say.
func (f *CredentialFollower) refused(ctx context.Context, k copyKey, action applier.CopyAction, refusal error) {
	src, err := applier.NewCredential(k.Kind)
	if err != nil {
		return
	}
	if err := f.sources.Get(ctx, client.ObjectKey{Namespace: f.credentialsNamespace, Name: k.Name}, src); err != nil {
		src = nil // gone meanwhile: the log line says it
	}
	said := refusal.Error()
	if src != nil {
		said += " @" + src.GetResourceVersion()
	}
	f.mu.Lock()
	again := f.refusals[k] == said
	f.refusals[k] = said
	f.mu.Unlock()
	if again {
		return
	}
	f.metrics.CopiesFollowed.WithLabelValues(k.Kind, metrics.FollowRefused).Inc()
	msg := refusal.Error()
	if action == applier.CopyRefused {
		msg += fmt.Sprintf(": if it is not the site's own, delete it (kubectl delete %s -n %s %s) and shadowgate copies the source again",
			strings.ToLower(k.Kind), k.Namespace, k.Name)
	}
	msg = fmt.Sprintf("the copy %s does not follow this %s, and the shadows there keep what it holds: %s", k, strings.ToLower(k.Kind), msg)
	log.FromContext(ctx).Error(refusal, "a credential copy does not follow its source", "copy", k.String(), "source", f.credentialsNamespace+"/"+k.Name, "remedy", msg)
	if src != nil {
		f.recorder.Eventf(src, nil, corev1.EventTypeWarning, ReasonCopyNotFollowing, "Follow", "%s", eventnote.Truncate(msg))
	}
}

// saidRefused says whether the follower said that k could not follow, and it has not since.
func (f *CredentialFollower) saidRefused(k copyKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.refusals[k]
	return ok
}

// forgetRefusal forgets that k could not follow: it can now, or is no longer the follower's.
func (f *CredentialFollower) forgetRefusal(k copyKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.refusals, k)
}
