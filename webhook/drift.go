package webhook

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"golang.org/x/time/rate"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/drift"
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
)

// driftFieldManager writes the interlink.eu/shadow-drift annotation, and nothing else, on
// offloaded pods.
const driftFieldManager = "shadowgate-shadow-drift"

// driftWritesPerSecond bounds the reconciler's writes of that annotation (with their Events):
// a policy change marks 1,000 shadows OutOfDate in 50 s rather than in one burst.
const driftWritesPerSecond = 20

// newDriftWrites is the limiter of those writes.
func newDriftWrites() *rate.Limiter {
	return rate.NewLimiter(driftWritesPerSecond, driftWritesPerSecond)
}

// follow brings the live shadow Deployment d of an admitted pod to want, the shadow the policy
// in force renders for it: when their inject.AnnotationRendered differ, the shadow is applied
// again (all but its node ConfigMap, which holds the compute node) once the pacer gives it a
// turn. A shadow already current writes nothing.
func (r *Reconciler) follow(ctx context.Context, pod *corev1.Pod, d *appsv1.Deployment, want *inject.Shadow) (time.Duration, error) {
	hash := want.Deployment.Annotations[inject.AnnotationRendered]
	key := client.ObjectKeyFromObject(pod)
	if d.Annotations[inject.AnnotationRendered] != hash {
		switch r.pacer.take(pod.UID, key, hash, d.Generation, tunnelInUse(pod), time.Now()) {
		case turnApplied:
			return 0, nil // the cache does not show the apply yet
		case turnWait:
			return r.sayDrift(ctx, pod, drift.Status{State: drift.OutOfDate})
		}
		shadow := *want
		shadow.NodeConfigMap = nil
		if _, err := r.applier.Apply(ctx, &shadow, false); err != nil {
			r.pacer.abandon(pod.UID)
			return 0, fmt.Errorf("rolling the shadow of pod %s/%s to the policy in force: %w", pod.Namespace, pod.Name, err)
		}
		log.FromContext(ctx).Info("applied the shadow the policy in force renders", "pod", key.String(),
			"deployment", d.Namespace+"/"+d.Name, "from", d.Annotations[inject.AnnotationRendered], "to", hash)
		return 0, nil
	}
	if r.said(pod).State == drift.Rolling {
		r.pacer.adopt(pod.UID, key, hash, time.Now())
	}
	step, roll := r.pacer.settle(pod.UID, d)
	switch step {
	case rollRestarting:
		r.recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonShadowRolled, "Roll", "%s", truncate(fmt.Sprintf(
			"the policy in force renders this pod's shadow differently: Deployment %s/%s was applied again and its shadow pod is being replaced. "+
				"Connections through the tunnel break now; it comes back once the new shadow pod is ready, at the same Service, "+
				"and the virtual kubelet reports the new shadow pod's IP as this pod's (docs/shadow.md \"When the policy changes\")", d.Namespace, d.Name)))
		return r.sayDrift(ctx, pod, drift.Status{State: drift.Rolling})
	case rollWaiting:
		return 0, nil
	case rollRestarted, rollInPlace:
		log.FromContext(ctx).Info("shadow rolled to the policy in force", "pod", key.String(), "restarted", step == rollRestarted,
			"seconds", time.Since(roll.since).Round(time.Second).Seconds())
	}
	return r.sayDrift(ctx, pod, drift.Status{State: drift.Current})
}

// refuse records that the policy in force would refuse the pod with a shadow (or gives it
// none), for reason: a Warning Event once per reason, the Refused state on the pod, and
// nothing else. The pod runs on, and its shadow stays as it is: deleting either is the
// admin's decision, not a policy edit's.
func (r *Reconciler) refuse(ctx context.Context, pod *corev1.Pod, reason string) (time.Duration, error) {
	r.pacer.refused(pod.UID)
	st := drift.Status{State: drift.Refused, Reason: truncate(reason)}
	if r.said(pod).Same(st) {
		return 0, nil
	}
	if wait := r.holdWrite(); wait > 0 {
		return wait, nil // the Event waits with the write, so each is said once
	}
	log.FromContext(ctx).Info("the policy in force would refuse a pod with a shadow; leaving both as they are", "pod", pod.Namespace+"/"+pod.Name, "reason", reason)
	r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonShadowRefusedByPolicy, "Reconcile", "%s", truncate(
		"the policy in force would refuse this pod; it and its shadow are left as they are, and the shadow no longer follows the policy: "+reason))
	return 0, r.writeDrift(ctx, pod, st)
}

// said is the drift status last said on pod: what this process wrote, else the annotation.
func (r *Reconciler) said(pod *corev1.Pod) drift.Status {
	r.mu.Lock()
	w, ok := r.drifts[pod.UID]
	r.mu.Unlock()
	if ok {
		return w
	}
	st, err := drift.Of(pod.Annotations)
	if err != nil {
		return drift.Status{} // unreadable: written again
	}
	return st
}

// sayDrift writes st as the pod's interlink.eu/shadow-drift annotation, or removes it for
// Current, when it says something else now, at the rate driftWrites allows: a policy change
// that makes every shadow of a large cluster OutOfDate does not send every write at once. Held
// back, it says how long until the pod's reconcile may try again.
func (r *Reconciler) sayDrift(ctx context.Context, pod *corev1.Pod, st drift.Status) (time.Duration, error) {
	if r.said(pod).Same(st) {
		return 0, nil
	}
	if wait := r.holdWrite(); wait > 0 {
		return wait, nil
	}
	return 0, r.writeDrift(ctx, pod, st)
}

// holdWrite takes a token for one drift write and returns 0, or returns how long until one
// is free and takes none.
func (r *Reconciler) holdWrite() time.Duration {
	res := r.driftWrites.Reserve()
	if wait := res.Delay(); wait > 0 {
		res.Cancel()
		return wait
	}
	return 0
}

// writeDrift applies st as the pod's annotation, with the pod's UID, so a pod created again
// under the same name in between is not written.
func (r *Reconciler) writeDrift(ctx context.Context, pod *corev1.Pod, st drift.Status) error {
	st.Since = time.Now().UTC().Truncate(time.Second)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	u.SetNamespace(pod.Namespace)
	u.SetName(pod.Name)
	u.SetUID(pod.UID)
	if v := st.Encode(); v != "" {
		u.SetAnnotations(map[string]string{drift.Annotation: v})
	}
	err := r.writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(driftFieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the pod is gone, or is another pod now: its own reconcile follows
	}
	if err != nil {
		return fmt.Errorf("writing %s on pod %s/%s: %w", drift.Annotation, pod.Namespace, pod.Name, err)
	}
	r.mu.Lock()
	r.drifts[pod.UID] = st
	r.mu.Unlock()
	return nil
}

// tunnelInUse says whether the pod's tunnel carries traffic, as the tunnel reporter last saw
// it: a roll breaks its connections, so such shadows roll after the others.
func tunnelInUse(pod *corev1.Pod) bool {
	st, err := tunnelstate.Decode(pod.Annotations[tunnelstate.AnnotationTunnelState])
	return err == nil && st.State == tunnelstate.Ready
}

// wakeAll asks for a reconcile of every pod with a shadow Deployment in the cache, after a new
// policy was put in force: each renders its shadow again, and the ones that differ roll.
func (r *Reconciler) wakeAll(ctx context.Context) error {
	var deployments appsv1.DeploymentList
	if err := r.client.List(ctx, &deployments, client.HasLabels{inject.LabelPodUID}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	for i := range deployments.Items {
		ns, name, ok := splitKey(deployments.Items[i].Annotations[inject.AnnotationShadowFor])
		if ok {
			r.wakeUp(ctx, types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	return nil
}

// wakeUp queues a reconcile of pod through the controller's channel source.
func (r *Reconciler) wakeUp(ctx context.Context, pod types.NamespacedName) {
	ev := event.GenericEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}}
	select {
	case r.wakes <- ev:
	case <-ctx.Done():
	}
}
