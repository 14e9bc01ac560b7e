package reconciler

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"golang.org/x/time/rate"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/eventnote"
	"github.com/interlink-hq/shadowgate/internal/printable"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
)

// Event reasons of the reconciler's following of the policy, recorded on the offloaded pod.
const (
	// ReasonShadowRolled: the policy in force renders the shadow's pod template differently,
	// and its shadow pod is being replaced.
	ReasonShadowRolled = "ShadowRolled"
	// ReasonShadowRefusedByPolicy: the policy in force would refuse the pod, or gives it no
	// shadow; pod and shadow are left as they are.
	ReasonShadowRefusedByPolicy = "ShadowRefusedByPolicy"
	// ReasonShadowRollStalled: a roll's shadow pod was not replaced within rollTimeout, and
	// the roll gave up its slot.
	ReasonShadowRollStalled = "ShadowRollStalled"
)

// driftFieldManager writes the shadow's state in a pod's Tunnel status, and nothing else.
const driftFieldManager = "shadowgate-shadow-drift"

// driftWritesPerSecond bounds the reconciler's writes of that state (with their Events):
// a policy change marks 1,000 shadows OutOfDate in 50 s rather than in one burst.
const driftWritesPerSecond = 20

// newDriftWrites is the limiter of those writes.
func newDriftWrites() *rate.Limiter {
	return rate.NewLimiter(driftWritesPerSecond, driftWritesPerSecond)
}

// follow brings the live shadow Deployment d of an admitted pod to want, the shadow the policy
// in force renders for it: when their inject.AnnotationRendered differ, the shadow is applied
// again once the pacer gives it a turn, all but its node ConfigMap, which holds the compute
// node, and with the live pod template's labels and annotations, read from the offloaded pod
// at admission: a label put on the pod since does not restart its shadow. A shadow already
// current writes nothing.
func (r *Reconciler) follow(ctx context.Context, pod *corev1.Pod, d *appsv1.Deployment, want *inject.Shadow) (time.Duration, error) {
	hash := want.Deployment.Annotations[inject.AnnotationRendered]
	key := client.ObjectKeyFromObject(pod)
	if d.Annotations[inject.AnnotationRendered] != hash {
		switch r.pacer.take(pod.UID, key, hash, d.Generation, r.tunnelInUse(ctx, pod), time.Now()) {
		case turnApplied:
			return 0, nil // the cache does not show the apply yet
		case turnWait:
			return r.sayDrift(ctx, pod, drift.Status{State: drift.OutOfDate})
		}
		shadow := *want
		shadow.NodeConfigMap = nil
		shadow.Deployment = want.Deployment.DeepCopy()
		shadow.Deployment.Spec.Template.ObjectMeta = *d.Spec.Template.ObjectMeta.DeepCopy()
		if _, err := r.applier.Apply(ctx, &shadow, false); err != nil {
			r.pacer.abandon(pod.UID)
			return 0, fmt.Errorf("rolling the shadow of pod %s/%s to the policy in force: %w", pod.Namespace, pod.Name, err)
		}
		log.FromContext(ctx).Info("applied the shadow the policy in force renders", "pod", key.String(),
			"deployment", d.Namespace+"/"+d.Name, "from", d.Annotations[inject.AnnotationRendered], "to", hash)
		return 0, nil
	}
	now := time.Now()
	// A roll another leader started: the Deployment replaces its pods for a later pod template
	// than its first (revision 1, the shadow admission applied; starting a held shadow changes
	// its replicas alone, and no revision).
	if revision(d) > 1 && rollingOut(d) && !r.pacer.isRolling(pod.UID) {
		r.pacer.adopt(pod.UID, key, hash, r.tunnelInUse(ctx, pod), now)
	}
	// The shadow's pods are read only for a roll in progress: a current shadow's reconcile, as
	// every one after a policy change, lists nothing.
	started := false
	if r.pacer.isRolling(pod.UID) {
		pods, err := shadows.Pods(ctx, r.client, d, pod)
		if err != nil {
			return 0, err
		}
		started = shadows.Started(pods)
	}
	step, roll := r.pacer.settle(pod.UID, d, started, now)
	switch step {
	case rollRestarting, rollWaiting:
		if step == rollRestarting {
			r.sayRolled(pod, d)
		}
		// Looked at again when the roll would stall, if nothing of the shadow changes before.
		wait, err := r.sayDrift(ctx, pod, drift.Status{State: drift.Rolling})
		if left := rollTimeout - now.Sub(roll.since); wait == 0 || left < wait {
			wait = left
		}
		return wait, err
	case rollStalled:
		log.FromContext(ctx).Info("the shadow pod was not replaced in time; its roll gives up its slot", "pod", key.String(),
			"deployment", d.Namespace+"/"+d.Name, "timeout", rollTimeout)
		r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonShadowRollStalled, "Roll", "%s", eventnote.Truncate(fmt.Sprintf(
			"the shadow Deployment %s/%s, applied again for the policy in force, has not replaced its shadow pod in %s; "+
				"the tunnel's state says why (kubectl describe pod %s -n %s, its TunnelFailed Events)", d.Namespace, d.Name, rollTimeout, pod.Name, pod.Namespace)))
	case rollRestarted, rollInPlace:
		if step == rollRestarted && !roll.restarting {
			r.sayRolled(pod, d) // over before a reconcile saw the shadow pod being replaced
		}
		log.FromContext(ctx).Info("shadow rolled to the policy in force", "pod", key.String(), "restarted", step == rollRestarted,
			"seconds", time.Since(roll.since).Round(time.Second).Seconds())
	}
	return r.sayDrift(ctx, pod, drift.Status{State: drift.Current})
}

// sayRolled records on the pod that its shadow pod was replaced to follow the policy.
func (r *Reconciler) sayRolled(pod *corev1.Pod, d *appsv1.Deployment) {
	r.recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonShadowRolled, "Roll", "%s", eventnote.Truncate(fmt.Sprintf(
		"the policy in force renders this pod's shadow differently: Deployment %s/%s was applied again and its shadow pod replaced. "+
			"Connections through the tunnel break; the tunnel comes back at the same Service once the new shadow pod is ready; "+
			"this pod and its job are not touched (docs/shadow.md \"When the policy changes\")", d.Namespace, d.Name)))
}

// refuse records that the policy in force would refuse the pod with a shadow (or gives it
// none), for reason: a Warning Event once per reason, the Refused state in the pod's Tunnel,
// and nothing else. The pod runs on, and its shadow stays as it is: deleting either is the
// admin's decision, not a policy edit's. The reason, which may quote the pod's annotations, is
// made printable for the Event and the Tunnel.
func (r *Reconciler) refuse(ctx context.Context, pod *corev1.Pod, reason string) (time.Duration, error) {
	reason = printable.String(reason)
	r.pacer.refused(pod.UID)
	st := drift.Status{State: drift.Refused, Reason: eventnote.Truncate(reason)}
	said, tunnel, err := r.said(ctx, pod)
	if err != nil || (said.Same(st) && holds(tunnel, st)) {
		return 0, err
	}
	if wait := r.holdWrite(pod.UID); wait > 0 {
		return wait, nil // the Event waits with the write, so each is said once
	}
	if !said.Same(st) {
		log.FromContext(ctx).Info("the policy in force would refuse a pod with a shadow; leaving both as they are", "pod", pod.Namespace+"/"+pod.Name, "reason", reason)
		r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonShadowRefusedByPolicy, "Reconcile", "%s", eventnote.Truncate(
			"the policy in force would refuse this pod; it and its shadow are left as they are, and the shadow no longer follows the policy: "+reason))
	}
	return 0, r.writeDrift(ctx, pod, tunnel, st)
}

// said is the drift status last said about pod, what its Events went by: what this process
// wrote, else what the pod's Tunnel holds (Current without one); with the Tunnel in the cache,
// nil for none.
func (r *Reconciler) said(ctx context.Context, pod *corev1.Pod) (drift.Status, *v1alpha1.Tunnel, error) {
	tunnel, err := applier.CachedTunnel(ctx, r.client, pod)
	if err != nil {
		return drift.Status{}, nil, err
	}
	r.mu.Lock()
	w, ok := r.drifts[pod.UID]
	r.mu.Unlock()
	if ok {
		return w, tunnel, nil
	}
	if tunnel == nil {
		return drift.Status{State: drift.Current}, nil, nil
	}
	return drift.Of(tunnel.Status.Shadow), tunnel, nil
}

// sayDrift writes st as the shadow's state in the pod's Tunnel when it says something else
// now, or the Tunnel does not hold it, at the rate driftWrites allows: a policy change that
// makes every shadow of a large cluster OutOfDate does not send every write at once. Held
// back, it says how long until the pod's reconcile may try again.
func (r *Reconciler) sayDrift(ctx context.Context, pod *corev1.Pod, st drift.Status) (time.Duration, error) {
	said, tunnel, err := r.said(ctx, pod)
	if err != nil || (said.Same(st) && holds(tunnel, st)) {
		return 0, err
	}
	if wait := r.holdWrite(pod.UID); wait > 0 {
		return wait, nil
	}
	return 0, r.writeDrift(ctx, pod, tunnel, st)
}

// holds says whether the cached Tunnel (nil for none) says st of the shadow. One that does not,
// though this process wrote st, was deleted and made again since, or lags behind the write
// (written again, which changes nothing).
func holds(tunnel *v1alpha1.Tunnel, st drift.Status) bool {
	if tunnel == nil {
		return st.State == drift.Current
	}
	return drift.Of(tunnel.Status.Shadow).Same(st)
}

// holdWrite gives the pod uid a turn for one drift write: 0 when it may write now, else how
// long until its turn, which is kept for it, so a held-back pod comes back once, when its turn
// is due, rather than asking again and again.
func (r *Reconciler) holdWrite(uid types.UID) time.Duration {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if at, ok := r.writeTurns[uid]; ok {
		if wait := at.Sub(now); wait > 0 {
			return wait
		}
		delete(r.writeTurns, uid)
		return 0
	}
	if wait := r.driftWrites.ReserveN(now, 1).DelayFrom(now); wait > 0 {
		r.writeTurns[uid] = now.Add(wait)
		return wait
	}
	return 0
}

// writeDrift writes st as the shadow's state in the pod's Tunnel (applier.ApplyTunnelStatus).
func (r *Reconciler) writeDrift(ctx context.Context, pod *corev1.Pod, tunnel *v1alpha1.Tunnel, st drift.Status) error {
	st.Since = time.Now().UTC().Truncate(time.Second)
	var status v1alpha1.TunnelStatus
	if st.State != drift.Current {
		status.Shadow = st.API() // a current shadow's state is absent
	}
	written, err := applier.ApplyTunnelStatus(ctx, r.writer, pod, tunnel, driftFieldManager, status)
	if err != nil {
		return err
	}
	if written {
		r.mu.Lock()
		r.drifts[pod.UID] = st
		r.mu.Unlock()
	}
	return nil
}

// tunnelInUse says whether the pod's tunnel carries traffic, as the tunnel reporter last saw
// it: a roll breaks its connections, so such shadows roll after the others. A Tunnel the cache
// cannot give counts as not in use.
func (r *Reconciler) tunnelInUse(ctx context.Context, pod *corev1.Pod) bool {
	tunnel, err := applier.CachedTunnel(ctx, r.client, pod)
	return err == nil && tunnel != nil && tunnel.Status.State == string(tunnelstate.Ready)
}

// wakeAll asks for a reconcile of every pod with a shadow Deployment in the cache, after a new
// policy was put in force: each renders its shadow again, and the ones that differ roll. The
// pods whose tunnel is not in use come first, so they take the first slots.
func (r *Reconciler) wakeAll(ctx context.Context) error {
	var deployments appsv1.DeploymentList
	if err := r.client.List(ctx, &deployments, client.HasLabels{inject.LabelPodUID}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	var inUse []types.NamespacedName
	for i := range deployments.Items {
		ns, name, ok := shadows.SplitKey(deployments.Items[i].Annotations[inject.AnnotationShadowFor])
		if !ok {
			continue
		}
		key := types.NamespacedName{Namespace: ns, Name: name}
		pod := &corev1.Pod{}
		if err := r.client.Get(ctx, key, pod); err == nil && r.tunnelInUse(ctx, pod) {
			inUse = append(inUse, key)
			continue
		}
		wakeUp(ctx, r.wakes, key)
	}
	for _, key := range inUse {
		wakeUp(ctx, r.wakes, key)
	}
	return nil
}

// wakeUp queues a reconcile of pod through wakes, the controller's channel source, unless ctx
// ends first.
func wakeUp(ctx context.Context, wakes chan<- event.GenericEvent, pod types.NamespacedName) {
	ev := event.GenericEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}}
	select {
	case wakes <- ev:
	case <-ctx.Done():
	}
}
