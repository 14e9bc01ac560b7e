package reconciler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"golang.org/x/time/rate"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/eventnote"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/internal/printable"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/validate"
)

// Event reasons of the reconciler's re-applies, recorded on the offloaded pod.
const (
	// ReasonShadowNotReapplied: the reconciler leaves a pod's missing shadow objects missing,
	// as the credential rules now in force would refuse the pod.
	ReasonShadowNotReapplied = "ShadowNotReapplied"
	// ReasonSecondShadow: the reconciler found the pod's shadow Deployment rewritten by
	// another controller, the virtual kubelet rendering a shadow of its own.
	ReasonSecondShadow = "SecondShadow"
)

// Reconciler is the reconciler of the package doc.
type Reconciler struct {
	client   client.Client // the manager's: cached reads of pods and shadow objects
	reader   client.Reader // uncached: what holds a shadow's name when the cache has none of ours
	identity shadows.Identity
	policies policystore.Policies
	// namespaces gives a re-judged pod its namespace's labels, as the webhook had them.
	namespaces policystore.Namespaces
	applier    applier.ShadowApplier
	grace      time.Duration
	rules      validate.CredentialRules // as /validate-pods: no site Secret copied into a pod's namespace unless allowed
	recorder   events.EventRecorder     // says on the pod why its shadow is not re-applied, rolled or refused
	writer     client.Client            // server-side apply of the shadow's state in the pod's Tunnel
	// pacer paces the rolls of shadows the policy in force renders differently; wakes is the
	// channel through which it, and a policy change, ask for a pod's reconcile.
	pacer         *rollPacer
	wakes         chan event.GenericEvent
	policyChanges interface{ OnChange(func()) }

	mu sync.Mutex
	// gone holds the UIDs of pods seen deleted, with when.
	gone map[types.UID]time.Time
	// orphaned holds, per pod UID, when its shadow objects were first found without the pod.
	orphaned map[types.UID]time.Time
	// drifts holds, per pod UID, the shadow's state this process wrote last in the pod's Tunnel:
	// the cache may not show it yet when the next reconcile comes.
	drifts map[types.UID]drift.Status
	// driftWrites paces the writes of that state (newDriftWrites); writeTurns holds,
	// per pod UID, when a write it was held back for is due (holdWrite).
	driftWrites *rate.Limiter
	writeTurns  map[types.UID]time.Time
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// New is the reconciler of a serving manager: it reads through mgr's cache and API reader,
// re-applies with shadowApplier, writes the shadow's state in Tunnels with writer (server-side apply),
// and rolls at most maxRolling shadows at a time to a policy of policies.
func New(ctx context.Context, mgr manager.Manager, identity shadows.Identity, policies interface {
	policystore.Policies
	OnChange(func())
}, namespaces policystore.Namespaces, shadowApplier applier.ShadowApplier, writer client.Client, recorder events.EventRecorder,
	m *metrics.Metrics, grace time.Duration, rules validate.CredentialRules, maxRolling int) *Reconciler {
	wakes := make(chan event.GenericEvent)
	return &Reconciler{
		client:     mgr.GetClient(),
		reader:     mgr.GetAPIReader(),
		identity:   identity,
		policies:   policies,
		namespaces: namespaces,
		applier:    shadowApplier,
		grace:      grace,
		rules:      rules,
		recorder:   recorder,
		writer:     writer,
		pacer:      newRollPacer(maxRolling, m, func(pod types.NamespacedName) { go wakeUp(ctx, wakes, pod) }),
		wakes:      wakes,
		gone:       map[types.UID]time.Time{},
		orphaned:   map[types.UID]time.Time{},
		drifts:     map[types.UID]drift.Status{},

		driftWrites:   newDriftWrites(),
		writeTurns:    map[types.UID]time.Time{},
		policyChanges: policies,
	}
}

// SetupWithManager indexes shadow objects by pod and starts the controller on the leader.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr manager.Manager) error {
	podOf := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ns, name, ok := shadows.SplitKey(o.GetAnnotations()[inject.AnnotationShadowFor])
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	})
	b := builder.ControllerManagedBy(mgr).Named("shadows").Watches(&corev1.Pod{}, handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
		},
		// Other pod updates change no shadow: the webhook judges pods on CREATE only.
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if shadows.PhaseEnded(e.ObjectOld, e.ObjectNew) {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.ObjectNew)})
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.podDeleted(e.Object.GetUID())
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
		},
	}, builder.WithPredicates(predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return shadows.MayHaveShadow(e.Object, r.isVirtualNode) },
		UpdateFunc: func(e event.UpdateEvent) bool { return shadows.MayHaveShadow(e.ObjectNew, r.isVirtualNode) },
		// Any node: a pod bound to a virtual node since taken out of the policy still had its
		// shadow, and its deletion is what lets the shadow go at once.
		DeleteFunc:  func(e event.DeleteEvent) bool { return shadows.MayHaveShadow(e.Object, shadows.AnyNode) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}))
	// A shadow pod that starts, or stops, moves a roll that waits for it to run (Started): the
	// pod it claims is queued, and Reconcile believes only its shadow Deployment's own pods.
	b = b.Watches(&corev1.Pod{}, podOf, builder.WithPredicates(predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return shadows.IsShadowPod(e.ObjectNew) && started(e.ObjectOld) != started(e.ObjectNew)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}))
	for _, obj := range shadows.Objects(r.identity.GatewayAPI) {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, shadows.IndexShadowFor, shadows.ShadowForIndex); err != nil {
			return err
		}
		b = b.Watches(obj, podOf)
	}
	b = b.WatchesRawSource(source.Channel(r.wakes, &handler.EnqueueRequestForObject{}))
	changes := make(chan struct{}, 1)
	r.policyChanges.OnChange(func() {
		r.pacer.newPolicy()
		select {
		case changes <- struct{}{}:
		default: // one is pending: it reads the policy in force when it runs
		}
	})
	// On the leader only, as the controller: a policy change wakes every pod with a shadow.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-changes:
				if err := r.wakeAll(ctx); err != nil {
					log.FromContext(ctx).Error(err, "listing the shadows to render again under the new policy")
				}
			}
		}
	})); err != nil {
		return err
	}
	return b.Complete(r)
}

// isVirtualNode says whether the policy in force lists the node.
func (r *Reconciler) isVirtualNode(name string) bool {
	_, ok := r.policies.Current().VirtualNodes[name]
	return ok
}

// Reconcile implements reconcile.Reconciler for the pod req names.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	live := true
	if err := r.client.Get(ctx, req.NamespacedName, pod); apierrors.IsNotFound(err) {
		live = false
	} else if err != nil {
		return reconcile.Result{}, err
	}
	// A finished pod is stored, so its shadow is no orphan of a refused admission: it goes
	// at once, without the grace period.
	done := live && shadows.Finished(pod)
	objs, err := r.identity.Objects(ctx, req.String())
	if err != nil {
		return reconcile.Result{}, err
	}
	r.podsGone(pod, live && !done, objs)
	now := time.Now()
	r.prune(now)
	var requeue time.Duration
	for _, obj := range objs {
		uid := types.UID(obj.GetLabels()[inject.LabelPodUID])
		ours := live && uid == pod.UID
		if ours {
			r.adopted(uid)
			if !done {
				continue
			}
		} else if wait := r.orphanWait(uid, now); wait > 0 {
			if requeue == 0 || wait < requeue {
				requeue = wait
			}
			continue
		}
		deleted, err := r.deleteObject(ctx, obj)
		if err != nil {
			return reconcile.Result{}, err
		}
		if deleted && ours {
			log.FromContext(ctx).Info("deleted shadow object whose pod has finished", "object", applier.DescribeObject(r.objectKind(obj), obj), "podUID", uid, "phase", pod.Status.Phase)
		} else if deleted {
			log.FromContext(ctx).Info("deleted shadow object whose pod is gone", "object", applier.DescribeObject(r.objectKind(obj), obj), "podUID", uid)
		}
	}
	if live && pod.DeletionTimestamp == nil && !done {
		again, err := r.ensure(ctx, pod, objs)
		if err != nil {
			return reconcile.Result{}, err
		}
		if again > 0 && (requeue == 0 || again < requeue) {
			requeue = again
		}
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// ensure re-applies what is missing of a live pod's shadow, and only that: an object that
// exists is left as it is, so a re-apply never resets what others wrote into it (the
// compute-node the virtual kubelet reports). Then it brings the shadow to the policy in force
// (follow, refuse), and says when to look at the pod again for a write the rate held back. A pod the mutating webhook never prepared gets
// none: /validate-pods refuses such a pod, so one that exists came in while the webhooks were
// not called, and its shadow would forward for a job that runs without its tunnel.
func (r *Reconciler) ensure(ctx context.Context, pod *corev1.Pod, have []client.Object) (requeue time.Duration, err error) {
	cfg, err := policystore.Configs{Policies: r.policies, Fixed: validate.Config{Credentials: r.rules}, Namespaces: r.namespaces}.Now(ctx, pod.Namespace)
	if err != nil {
		return 0, err
	}
	a := inject.Admit(pod, cfg)
	present := map[string]bool{}
	var deployment *appsv1.Deployment
	var haveNodeConfigMap bool
	for _, obj := range have {
		if types.UID(obj.GetLabels()[inject.LabelPodUID]) != pod.UID {
			continue
		}
		present[objectKey(obj)] = true
		switch o := obj.(type) {
		case *appsv1.Deployment:
			deployment = o
		case *corev1.ConfigMap:
			haveNodeConfigMap = true
		}
	}
	// A front door publishes the pod outside the cluster: one the policy in force does not give
	// the pod (it refuses the pod, offloads it nowhere, or gives it no front door) goes now,
	// whatever else of the shadow stays.
	var want *inject.Shadow
	if a.Decision.Allowed() && a.Offload != nil {
		want = a.Shadow
	}
	if err := r.dropStaleFrontDoor(ctx, pod, have, want); err != nil {
		return 0, err
	}
	if !a.Decision.Allowed() {
		// A pod the policy in force refuses (tightened since, or a serve with stricter
		// credential flags), or one the mutating webhook never prepared (it came in while the
		// webhooks were not called, and its shadow would forward for a job that runs without
		// its tunnel): what is left of its shadow stays, what is missing is not applied
		// again. Said only when the shadow is incomplete, not on every reconcile of a whole one.
		if (a.Offload != nil || len(present) > 0) && (deployment == nil || !haveNodeConfigMap) {
			reason := printable.String(a.Decision.Errors.ToAggregate().Error())
			log.FromContext(ctx).Info("not re-applying what is missing of the shadow of a pod the policy in force refuses",
				"pod", pod.Namespace+"/"+pod.Name, "reason", reason)
			r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonShadowNotReapplied, "Reconcile", "%s", eventnote.Truncate(
				"part of this pod's shadow is missing and is not re-applied: "+reason))
		}
		if deployment == nil {
			r.pacer.gone(pod.UID) // no shadow Deployment to count as drifted
			return 0, nil
		}
		return r.refuse(ctx, pod, a.Decision.Errors.ToAggregate().Error())
	}
	if a.Offload == nil {
		if deployment == nil {
			return 0, nil
		}
		if pod.Spec.NodeName == "" {
			return r.refuse(ctx, pod, "the policy in force lists no virtual node this pod may run on")
		}
		return r.refuse(ctx, pod, fmt.Sprintf("the policy in force lists no virtual node %q", pod.Spec.NodeName))
	}
	if a.Shadow == nil {
		if deployment == nil {
			return 0, nil
		}
		return r.refuse(ctx, pod, fmt.Sprintf("under the policy in force virtual node %q gives this pod no SSH shadow", a.Offload.NodeName))
	}
	missing := *a.Shadow
	if present[objectKey(missing.NodeConfigMap)] {
		missing.NodeConfigMap = nil
	}
	if missing.Service != nil && present[objectKey(missing.Service)] {
		missing.Service = nil
	}
	if present[objectKey(missing.NetworkPolicy)] {
		missing.NetworkPolicy = nil
	}
	if missing.Ingress != nil && present[objectKey(missing.Ingress)] {
		missing.Ingress = nil
	}
	missing.HTTPRoutes = slices.DeleteFunc(slices.Clone(missing.HTTPRoutes), func(r *gatewayv1.HTTPRoute) bool { return present[objectKey(r)] })
	if present[objectKey(missing.Deployment)] {
		missing.Deployment = nil
	}
	if deployment != nil {
		if err := applier.StartShadow(ctx, r.client, deployment, a.Shadow.Deployment); err != nil {
			return 0, err
		}
	}
	if missing.NodeConfigMap == nil && missing.Service == nil && missing.Ingress == nil && len(missing.HTTPRoutes) == 0 &&
		missing.NetworkPolicy == nil && missing.Deployment == nil {
		return r.follow(ctx, pod, deployment, a.Shadow)
	}
	if missing.Deployment != nil {
		r.sayIfSecondShadow(ctx, pod, missing.Deployment)
	}
	if _, err := r.applier.Apply(ctx, &missing, false); err != nil {
		return 0, fmt.Errorf("re-applying the shadow of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	log.FromContext(ctx).Info("re-applied what was missing of a live pod's shadow", "pod", pod.Namespace+"/"+pod.Name)
	if deployment == nil {
		return 0, nil // applied as the policy in force renders it
	}
	return r.follow(ctx, pod, deployment, a.Shadow)
}

// dropStaleFrontDoor deletes the pod's Ingress and HTTPRoutes (of have, its shadow objects)
// that want, its shadow under the policy in force (nil when the policy gives the pod none),
// no longer has: a front door turned off, another kind, a port no longer published, a pod the
// policy now refuses. Left, they would publish the pod where the policy
// says not to. The rest of the shadow follows the policy at its roll's turn (follow).
func (r *Reconciler) dropStaleFrontDoor(ctx context.Context, pod *corev1.Pod, have []client.Object, want *inject.Shadow) error {
	wanted := map[string]bool{}
	if want != nil {
		if want.Ingress != nil {
			wanted[objectKey(want.Ingress)] = true
		}
		for _, route := range want.HTTPRoutes {
			wanted[objectKey(route)] = true
		}
	}
	for _, obj := range have {
		switch obj.(type) {
		case *networkingv1.Ingress, *gatewayv1.HTTPRoute:
		default:
			continue
		}
		if types.UID(obj.GetLabels()[inject.LabelPodUID]) != pod.UID || wanted[objectKey(obj)] {
			continue
		}
		deleted, err := r.deleteObject(ctx, obj)
		if err != nil {
			return err
		}
		if deleted {
			log.FromContext(ctx).Info("deleted a front door the policy in force no longer gives the pod", "pod", pod.Namespace+"/"+pod.Name,
				"object", applier.DescribeObject(r.objectKind(obj), obj))
		}
	}
	return nil
}

// sayIfSecondShadow records a Warning Event on pod when the name of its shadow Deployment,
// missing from the cache of shadowgate's objects, is held by a Deployment shadowgate does not
// manage: the virtual kubelet with EnableTunnel and ShadowMode: ssh renders a shadow of its own
// under the same name, and on finding shadowgate's it updates it into its own. shadowgate's is
// applied again, so the policy in force decides what runs, and the pod's owner and the admin
// are told which setting of the virtual kubelet to change.
func (r *Reconciler) sayIfSecondShadow(ctx context.Context, pod *corev1.Pod, ours *appsv1.Deployment) {
	if r.reader == nil {
		return
	}
	held := &appsv1.Deployment{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(ours), held); err != nil {
		return // gone, or unreadable: the apply that follows says what is wrong
	}
	if held.Labels[inject.LabelManagedBy] == inject.ManagedBy {
		return
	}
	log.FromContext(ctx).Info("the shadow Deployment's name is held by a Deployment shadowgate does not manage; applying shadowgate's again",
		"pod", pod.Namespace+"/"+pod.Name, "deployment", held.Namespace+"/"+held.Name, "managedBy", held.Labels[inject.LabelManagedBy])
	r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonSecondShadow, "Reconcile", "%s", eventnote.Truncate(fmt.Sprintf(
		"a second shadow of this pod: Deployment %s/%s was rewritten by another controller, most likely the virtual kubelet rendering its own SSH shadow; "+
			"shadowgate applies its own again. Set Network.EnableTunnel: false in the virtual kubelet's VirtualKubeletConfig.yaml "+
			"(docs/virtual-kubelet.md), so only shadowgate renders shadows", held.Namespace, held.Name)))
}

// deleteObject deletes obj as the cache saw it and says whether this call deleted it: two
// reconciles of one pod can race to the same object, and only the one that deleted it logs so.
func (r *Reconciler) deleteObject(ctx context.Context, obj client.Object) (bool, error) {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := r.client.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// podsGone drops what is kept about the rolls and drift of every pod UID that objs, the shadow
// objects of pod's name, stand for, but the live pod's (live false: the pod is gone or has
// finished): a pod created again under its name leaves the earlier one's behind.
func (r *Reconciler) podsGone(pod *corev1.Pod, live bool, objs []client.Object) {
	gone := map[types.UID]bool{}
	if !live && pod.UID != "" {
		gone[pod.UID] = true
	}
	for _, obj := range objs {
		if uid := types.UID(obj.GetLabels()[inject.LabelPodUID]); uid != "" && (!live || uid != pod.UID) {
			gone[uid] = true
		}
	}
	for uid := range gone {
		r.forgetDrift(uid)
	}
}

// forgetDrift drops the roll, drift state and write turn of the pod uid.
func (r *Reconciler) forgetDrift(uid types.UID) {
	r.pacer.gone(uid)
	r.mu.Lock()
	delete(r.drifts, uid)
	delete(r.writeTurns, uid)
	r.mu.Unlock()
}

func (r *Reconciler) podDeleted(uid types.UID) {
	r.forgetDrift(uid)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gone[uid] = time.Now()
}

// orphanWait is how much longer the shadow objects of pod uid wait before deletion.
func (r *Reconciler) orphanWait(uid types.UID, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.gone[uid]; ok {
		return 0
	}
	since, ok := r.orphaned[uid]
	if !ok {
		since = now
		r.orphaned[uid] = now
	}
	return r.grace - now.Sub(since)
}

// adopted forgets that pod uid's shadow was found without its pod: the pod has been stored.
func (r *Reconciler) adopted(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.orphaned, uid)
}

// prune forgets what can no longer matter, so the maps do not grow with every pod ever
// deleted: a deletion seen longer ago than the grace period would have let its shadow go by
// now anyway, and an orphan still listed after twice the grace period is recorded afresh.
func (r *Reconciler) prune(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, at := range r.gone {
		if now.Sub(at) > r.grace {
			delete(r.gone, uid)
		}
	}
	for uid, at := range r.orphaned {
		if now.Sub(at) > 2*r.grace {
			delete(r.orphaned, uid)
		}
	}
}

func (r *Reconciler) objectKind(obj client.Object) string {
	gvk, err := apiutil.GVKForObject(obj, r.client.Scheme())
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}

func objectKey(obj client.Object) string {
	return fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
}

// started says whether o is a pod that has started (shadows.Started).
func started(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return ok && shadows.Started([]*corev1.Pod{pod})
}
