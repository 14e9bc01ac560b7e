package tunnels

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// The fixtures of the reporter's tests: the shadow of pod user/notebook in user-shadow.
const reporterShadow, reporterShadowNS = "notebook-user", "user-shadow"

// shadowDeploymentOf is the shadow Deployment of user/notebook with pod UID uid.
func shadowDeploymentOf(uid string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: reporterShadow, Namespace: reporterShadowNS,
			Labels:      map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelPodUID: uid},
			Annotations: map[string]string{inject.AnnotationShadowFor: "user/notebook"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"interlink.eu/shadow": reporterShadow}}},
	}
}

// shadowPodOf is a pod labelled and annotated as the shadow pod of user/notebook with pod UID
// uid, in ns, controlled by the ReplicaSet owner ("" for none).
func shadowPodOf(name, ns, uid, owner string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels:      map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelPodUID: uid, "interlink.eu/shadow": reporterShadow},
		Annotations: map[string]string{inject.AnnotationShadowFor: "user/notebook"}}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner, UID: "rs", Controller: ptr.To(true)}}
	}
	return p
}

// reportingOnAReadyTunnel is user/notebook (pod UID pod-uid), whose shadow pod is ready, in a
// fake API server with more objects, and a reporter on it: the pod, the client, the reporter,
// its Events and the pod's reconcile request.
func reportingOnAReadyTunnel(t *testing.T, more ...client.Object) (*corev1.Pod, client.WithWatch, *TunnelReporter, *events.FakeRecorder, reconcile.Request) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "pod-uid"}}
	shadowPod := forwardingShadowPod()
	shadowPod.Status = corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ssh-forward", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}}}}
	c := reporterClient(t, interceptor.Funcs{}, append([]client.Object{pod, shadowDeploymentOf("pod-uid"), shadowPod}, more...)...)
	r, recorder := testReporter(t, c)
	return pod, c, r, recorder, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pod)}
}

// forwardingShadowPod is the pod's shadow pod, its one container ssh-forward, without a status.
func forwardingShadowPod() *corev1.Pod {
	p := shadowPodOf(reporterShadow+"-abc-xyz", reporterShadowNS, "pod-uid", reporterShadow+"-abc")
	p.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "ssh-forward"}}}
	return p
}

// reporterClient is a fake client holding objs, with the reporter's index and funcs.
func reporterClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	return shadowtest.Client(objs...).
		WithIndex(&appsv1.Deployment{}, shadows.IndexShadowFor, shadows.ShadowForIndex).
		WithIndex(&corev1.Service{}, shadows.IndexShadowFor, shadows.ShadowForIndex).
		WithIndex(&corev1.ConfigMap{}, shadows.IndexShadowFor, shadows.ShadowForIndex).
		WithIndex(&networkingv1.NetworkPolicy{}, shadows.IndexShadowFor, shadows.ShadowForIndex).
		WithIndex(&networkingv1.Ingress{}, shadows.IndexShadowFor, shadows.ShadowForIndex).
		WithIndex(&gatewayv1.HTTPRoute{}, shadows.IndexShadowFor, shadows.ShadowForIndex).
		WithIndex(&corev1.Event{}, "involvedObject.uid", func(o client.Object) []string {
			return []string{string(o.(*corev1.Event).InvolvedObject.UID)}
		}).
		WithInterceptorFuncs(funcs).Build()
}

// testReporter is a reporter reading and writing c, its Events in the fake recorder returned.
func testReporter(t *testing.T, c client.Client) (*TunnelReporter, *events.FakeRecorder) {
	t.Helper()
	metrics, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(10)
	identity := shadows.Identity{Cache: c, Namespaces: shadowtest.NamespaceLabels{reporterShadowNS: {inject.LabelShadowNamespaceFor: "user"}}}
	return &TunnelReporter{cache: c, reader: c, identity: identity, writer: c, policies: shadowtest.FixedPolicy{Policy: &policy.Policy{}}, recorder: recorder, metrics: metrics,
		now: time.Now, states: map[types.NamespacedName]series{}, written: map[types.NamespacedName]writtenState{}, waited: map[types.NamespacedName]waitRead{}}, recorder
}

// A pod labelled and annotated as another tenant's shadow pod is not believed: only a pod in
// the shadow Deployment's namespace, selected by it, owned by one of its ReplicaSets and
// labelled with the claimed pod's UID reports on that pod.
func TestTheTunnelReporterBelievesOnlyTheShadowsOwnPod(t *testing.T) {
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "victim-uid"}}
	deployment := shadowDeploymentOf("victim-uid")
	for name, tc := range map[string]struct {
		pods []client.Object
		want string // the shadow pod believed, "" for none
	}{
		"A look-alike in the attacker's own namespace is not believed.": {
			pods: []client.Object{shadowPodOf("evil", "evil", "victim-uid", reporterShadow+"-abc")},
		},
		"A look-alike in the shadow namespace that no ReplicaSet of the shadow owns is not believed.": {
			pods: []client.Object{shadowPodOf("loose", reporterShadowNS, "victim-uid", "")},
		},
		"A pod of the shadow Deployment with another pod's UID is not believed.": {
			pods: []client.Object{shadowPodOf("other", reporterShadowNS, "other-uid", reporterShadow+"-abc")},
		},
		"The shadow Deployment's own pod is believed.": {
			pods: []client.Object{shadowPodOf("evil", "evil", "victim-uid", reporterShadow+"-abc"), shadowPodOf(reporterShadow+"-abc-xyz", reporterShadowNS, "victim-uid", reporterShadow+"-abc")},
			want: reporterShadow + "-abc-xyz",
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := reporterClient(t, interceptor.Funcs{}, append([]client.Object{victim, deployment}, tc.pods...)...)
			r, _ := testReporter(t, c)
			sh, err := r.shadowOf(context.Background(), victim)
			if err != nil || sh == nil {
				t.Fatalf("shadowOf: %v, %v", sh, err)
			}
			got := ""
			if sh.pod != nil {
				got = sh.pod.Name
			}
			if got != tc.want {
				t.Errorf("believed shadow pod %q, want %q", got, tc.want)
			}
		})
	}
}

// The virtual kubelet writes the pod back as it stored it on every status update: a write of
// shadowgate's to the pod would be a fight for its life. The state goes to the pod's Tunnel,
// once per change, and the pod is never written.
func TestTheStateGoesToThePodsTunnelAndNeverToThePod(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "pod-uid"}}
	failing := shadowPodOf(reporterShadow+"-abc-xyz", reporterShadowNS, "pod-uid", reporterShadow+"-abc")
	failing.CreationTimestamp = metav1.Now()
	failing.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "ssh-forward"}}}
	failing.Status = corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ssh-forward",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: "LoginRefused: the login node refused the key"}}}}}
	var podWrites, tunnelWrites int
	count := func(obj any) {
		switch o := obj.(type) {
		case *corev1.Pod:
			if o.Namespace == "user" {
				podWrites++
			}
		case interface{ GetKind() *string }:
			if o.GetKind() != nil && *o.GetKind() == "Pod" {
				podWrites++
			}
		}
	}
	c := reporterClient(t, interceptor.Funcs{
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count(obj)
			return cl.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count(obj)
			return cl.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			count(obj)
			return cl.Apply(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			count(obj)
			return cl.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			count(obj)
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceApply: func(ctx context.Context, cl client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			count(obj)
			tunnelWrites++
			return cl.SubResource(sub).Apply(ctx, obj, opts...)
		},
	}, pod, shadowDeploymentOf("pod-uid"), failing)
	r, recorder := testReporter(t, c)
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "user", Name: "notebook"}}
	for range 3 {
		if _, err := r.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	if podWrites != 0 {
		t.Errorf("%d writes to the pod, want none", podWrites)
	}
	if tunnelWrites != 1 {
		t.Errorf("%d writes of the Tunnel's status, want the one change", tunnelWrites)
	}
	tunnel := shadowtest.TunnelOf(t, c, pod)
	if tunnel == nil || tunnel.Status.State != string(tunnelstate.Failed) || tunnel.Status.Reason != string(tunnelstate.ReasonLoginRefused) || tunnel.Status.PodUID != pod.UID {
		t.Fatalf("Tunnel %+v, want the pod's, Failed with LoginRefused", tunnel)
	}
	if n := len(recorder.Events); n != 1 {
		t.Errorf("%d Events recorded, want the one TunnelFailed", n)
	}
	// A new leader reads the state from the Tunnel, and says nothing again.
	r, recorder = testReporter(t, c)
	if _, err := r.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if tunnelWrites != 1 || len(recorder.Events) != 0 {
		t.Errorf("a new leader wrote %d times and recorded %d Events, want neither", tunnelWrites-1, len(recorder.Events))
	}
}

// A Tunnel of the pod's name that an earlier pod owns (the garbage collector has not removed
// it yet) says nothing about the pod: it is replaced by the pod's own.
func TestATunnelOfAnEarlierPodIsReplaced(t *testing.T) {
	earlier := shadowtest.TunnelSaying(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "earlier-uid"}},
		v1alpha1.TunnelStatus{State: string(tunnelstate.Ready), Reason: string(tunnelstate.ReasonReady)})
	pod, c, r, recorder, key := reportingOnAReadyTunnel(t, earlier)
	if _, err := r.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	tunnel := shadowtest.TunnelOf(t, c, pod) // fails the test unless the pod owns it
	if tunnel == nil || tunnel.Status.State != string(tunnelstate.Ready) || tunnel.Status.PodUID != pod.UID {
		t.Fatalf("Tunnel %+v, want the pod's own, Ready", tunnel)
	}
	if len(recorder.Events) != 1 || !strings.Contains(<-recorder.Events, ReasonTunnelReady) {
		t.Error("the pod was not told its tunnel is Ready: the earlier pod's Ready was taken for its own")
	}
}

// A Tunnel deleted while its pod runs (by an admin, or with the CRD) is made again, holding
// what the reporter said, and nothing is said again on the pod.
func TestADeletedTunnelIsMadeAgain(t *testing.T) {
	pod, c, r, recorder, key := reportingOnAReadyTunnel(t)
	if _, err := r.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), shadowtest.TunnelOf(t, c, pod)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if tunnel := shadowtest.TunnelOf(t, c, pod); tunnel == nil || tunnel.Status.State != string(tunnelstate.Ready) {
		t.Fatalf("Tunnel %+v after its deletion, want it made again, Ready", tunnel)
	}
	if n := len(recorder.Events); n != 1 {
		t.Errorf("%d Events, want the one TunnelReady: the state did not change", n)
	}
}

// A finished pod keeps its tunnel's last state in its Tunnel until it is deleted.
func TestAFinishedPodKeepsItsFinalState(t *testing.T) {
	pod, c, r, recorder, key := reportingOnAReadyTunnel(t)
	if _, err := r.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if err := c.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	if tunnel := shadowtest.TunnelOf(t, c, pod); tunnel == nil || tunnel.Status.State != string(tunnelstate.Ended) || tunnel.Status.Reason != string(tunnelstate.ReasonJobCompleted) {
		t.Errorf("Tunnel %+v of a pod that succeeded, want Ended with JobCompleted", tunnel)
	}
	var said []string
	for len(recorder.Events) > 0 {
		said = append(said, <-recorder.Events)
	}
	if len(said) != 2 || !strings.Contains(said[1], corev1.EventTypeNormal+" "+ReasonTunnelEnded) {
		t.Errorf("Events %q, want TunnelReady, then one Normal TunnelEnded", said)
	}
}

// A real kubelet runs the readiness probe while the shadow rebuilds its tunnel in place (the
// job's node reached at another address): the shadow pod dips to not Ready, the tunnel to
// Starting, and comes back as it was. The pod's owner was told TunnelReady once, and is not
// told it again; a change of what is said (another failure, another node) still is.
func TestATunnelThatDipsWhileItIsCheckedIsNotSaidReadyAgain(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "pod-uid"}}
	shadowPod := forwardingShadowPod()
	started := metav1.NewTime(time.Now().Add(-time.Hour))
	setReady := func(ready bool) {
		shadowPod.Status = corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ssh-forward", Ready: ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}
	}
	setReady(true)
	c := reporterClient(t, interceptor.Funcs{}, pod, shadowDeploymentOf("pod-uid"), shadowPod)
	r, recorder := testReporter(t, c)
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "user", Name: "notebook"}}
	for i, ready := range []bool{true, false, true, false, true} {
		setReady(ready)
		if err := c.Status().Update(context.Background(), shadowPod); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(context.Background(), key); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	var said []string
	for len(recorder.Events) > 0 {
		said = append(said, <-recorder.Events)
	}
	if len(said) != 1 || !strings.Contains(said[0], ReasonTunnelReady) {
		t.Errorf("Events %q, want the one TunnelReady", said)
	}
}

// Only a Ready that comes back as it was is held back: a failure that comes back after a check
// is said again, so the pod keeps a current Warning while its tunnel keeps failing.
func TestAFailureThatComesBackAfterACheckIsSaidAgain(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "pod-uid"}}
	shadowPod := forwardingShadowPod()
	failedState := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
		Message: "SHADOWGATE_REASON=LoginRefused the login node refused the key"}}
	checking := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}
	c := reporterClient(t, interceptor.Funcs{}, pod, shadowDeploymentOf("pod-uid"), shadowPod)
	r, recorder := testReporter(t, c)
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "user", Name: "notebook"}}
	for i, state := range []corev1.ContainerState{failedState, checking, failedState} {
		shadowPod.Status = corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ssh-forward", State: state}}}
		if err := c.Status().Update(context.Background(), shadowPod); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(context.Background(), key); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	failures := 0
	for len(recorder.Events) > 0 {
		if strings.Contains(<-recorder.Events, ReasonTunnelFailed) {
			failures++
		}
	}
	if failures != 2 {
		t.Errorf("%d TunnelFailed Events, want 2: the failure, and again when it came back", failures)
	}
}

// What a shadow's containers say (termination messages, the compute node they found or were
// given) reaches the pod's Events and its Tunnel made printable: an escape
// sequence or a bidi override is written as a visible escape, never raw.
func TestWhatTheShadowSaysReachesEventsAndTheTunnelPrintable(t *testing.T) {
	hostile := "\x1b[2J\x1b]0;owned\x07\u202eyek eht\u009b31m\x7f"
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}
	for name, tc := range map[string]struct {
		forward     corev1.ContainerStatus
		computeNode string // the node ConfigMap's, "" for none
		reason      string // of the one Event
	}{
		"A termination message with control characters is said escaped in TunnelFailed.": {
			forward: corev1.ContainerStatus{Name: "ssh-forward", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", Message: "LoginRefused: " + hostile}}},
			reason: ReasonTunnelFailed,
		},
		"A compute node with control characters is said escaped in TunnelReady.": {
			forward:     corev1.ContainerStatus{Name: "ssh-forward", Ready: true, State: running},
			computeNode: "10.0.0.3" + hostile,
			reason:      ReasonTunnelReady,
		},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "pod-uid"}}
			shadowPod := forwardingShadowPod()
			shadowPod.Status = corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{tc.forward}}
			objs := []client.Object{pod, shadowDeploymentOf("pod-uid"), shadowPod}
			if tc.computeNode != "" {
				objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: reporterShadow + "-node", Namespace: reporterShadowNS,
					Labels:      map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelPodUID: "pod-uid", validate.LabelShadowRole: validate.ShadowRoleNode},
					Annotations: map[string]string{inject.AnnotationShadowFor: "user/notebook"}},
					Data: map[string]string{validate.ComputeNodeKey: tc.computeNode}})
			}
			c := reporterClient(t, interceptor.Funcs{}, objs...)
			r, recorder := testReporter(t, c)
			key := types.NamespacedName{Namespace: "user", Name: "notebook"}
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			tunnel := shadowtest.TunnelOf(t, c, pod)
			if len(recorder.Events) != 1 || tunnel == nil {
				t.Fatalf("%d Events recorded and Tunnel %+v written, want one %s and the state", len(recorder.Events), tunnel, tc.reason)
			}
			state := fmt.Sprintf("%+v", tunnel.Status)
			said := <-recorder.Events
			if !strings.Contains(said, tc.reason) || !strings.Contains(said, `\x1b[2J\x1b]0;owned\a\u202eyek eht\u009b31m\x7f`) {
				t.Errorf("the Event does not say the %s with what the shadow said escaped: %q", tc.reason, said)
			}
			for what, text := range map[string]string{"the Event": said, "the Tunnel": state} {
				for _, r := range text {
					if !unicode.IsPrint(r) {
						t.Errorf("%s holds %U raw: %q", what, r, text)
					}
				}
			}
		})
	}
}

// interLink's Slurm plugin reports a job's end to the virtual kubelet half a minute after Slurm
// ends it; meanwhile the shadow finds the job COMPLETED and says JobCompleted. The pod's owner
// is told once, with a Normal TunnelEnded, never a Warning; the pod's Succeeded, when it
// comes, leaves that state as it is and says nothing more.
func TestAJobThatCompletedIsSaidEndedNeverFailed(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "pod-uid"}}
	shadowPod := forwardingShadowPod()
	shadowPod.UID = "shadow-pod-uid"
	shadowPod.Status = corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ssh-forward",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}}}}
	probe := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: reporterShadowNS}, Reason: "Unhealthy",
		Message:        "Readiness probe failed: JobCompleted: job pod-uid COMPLETED in Slurm: the pod's batch job has ended, and its tunnel with it",
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", UID: shadowPod.UID, FieldPath: "spec.containers{ssh-forward}"},
		LastTimestamp:  metav1.Now()}
	writes := 0
	c := reporterClient(t, interceptor.Funcs{SubResourceApply: func(ctx context.Context, cl client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
		writes++
		return cl.SubResource(sub).Apply(ctx, obj, opts...)
	}}, pod, shadowDeploymentOf("pod-uid"), shadowPod, probe)
	r, recorder := testReporter(t, c)
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "user", Name: "notebook"}}
	for i := range 2 {
		if _, err := r.Reconcile(context.Background(), key); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	// The virtual kubelet, at last, reports the pod Succeeded.
	p := &corev1.Pod{}
	if err := c.Get(context.Background(), key.NamespacedName, p); err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodSucceeded
	if err := c.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}

	var said []string
	for len(recorder.Events) > 0 {
		said = append(said, <-recorder.Events)
	}
	if len(said) != 1 || !strings.HasPrefix(said[0], corev1.EventTypeNormal+" "+ReasonTunnelEnded+" ") || !strings.Contains(said[0], "COMPLETED in Slurm") {
		t.Errorf("Events %q, want the one Normal TunnelEnded saying the job completed", said)
	}
	for _, e := range said {
		if strings.HasPrefix(e, corev1.EventTypeWarning) {
			t.Errorf("a Warning for a job that completed: %q", e)
		}
	}
	if writes != 1 {
		t.Fatalf("%d tunnel states written, want the one Ended", writes)
	}
	if tunnel := shadowtest.TunnelOf(t, c, p); tunnel == nil || tunnel.Status.State != string(tunnelstate.Ended) || tunnel.Status.Reason != string(tunnelstate.ReasonJobCompleted) {
		t.Errorf("Tunnel %+v once the pod Succeeded, want Ended with JobCompleted kept", tunnel)
	}
}

// queuedShadow is user/notebook (pod UID pod-uid) and its shadow pod, whose job is queued:
// wait-for-node runs beside a ready wait-reason sidecar.
func queuedShadow() (*corev1.Pod, *corev1.Pod) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "pod-uid"}}
	shadowPod := shadowPodOf(reporterShadow+"-abc-xyz", reporterShadowNS, "pod-uid", reporterShadow+"-abc")
	shadowPod.UID = "shadow-pod-uid"
	started := metav1.NewTime(time.Now().Add(-time.Hour))
	shadowPod.Spec = corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "wait-reason", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}, {Name: "wait-for-node"}},
		Containers:     []corev1.Container{{Name: "ssh-forward"}},
	}
	shadowPod.Status = corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
		{Name: "wait-reason", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
		{Name: "wait-for-node", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
	}}
	return pod, shadowPod
}

// waitReasonProbe is the kubelet's Event of the wait-reason sidecar's failed probe, printing line.
func waitReasonProbe(shadowPod *corev1.Pod, name, line string, at time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: reporterShadowNS}, Reason: "Unhealthy",
		Message:        "Readiness probe failed: " + line,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", UID: shadowPod.UID, FieldPath: "spec.initContainers{wait-reason}"},
		LastTimestamp:  metav1.NewTime(at)}
}

// setWaitReasonReady sets the wait-reason sidecar's ready, as the kubelet does when its probe
// fails (false) and passes again (true).
func setWaitReasonReady(t *testing.T, c client.Client, shadowPod *corev1.Pod, ready bool) {
	t.Helper()
	p := &corev1.Pod{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(shadowPod), p); err != nil {
		t.Fatal(err)
	}
	p.Status.InitContainerStatuses[0].Ready = ready
	if err := c.Status().Update(t.Context(), p); err != nil {
		t.Fatal(err)
	}
}

const (
	beginTime = "WaitingForNode: job 12 is PENDING in Slurm (reason BeginTime, expected start 2026-12-06T07:00:00Z): waiting for it to run"
	priority  = "WaitingForNode: job 12 is PENDING in Slurm (reason Priority, expected start 2026-12-06T09:00:00Z): waiting for it to run"
)

// While the job is queued, what Slurm says of it (the wait-reason sidecar's probe failures)
// reaches the pod's TunnelWaitingForNode Event and its Tunnel: said once per change, not
// per look.
func TestAQueuedJobsSlurmReasonIsSaidOncePerChange(t *testing.T) {
	pod, shadowPod := queuedShadow()
	c := reporterClient(t, interceptor.Funcs{}, pod, shadowDeploymentOf("pod-uid"), shadowPod, waitReasonProbe(shadowPod, "begin", beginTime, time.Now()))
	r, recorder := testReporter(t, c)
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "user", Name: "notebook"}}
	look := func() []string {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		var said []string
		for len(recorder.Events) > 0 {
			said = append(said, <-recorder.Events)
		}
		return said
	}
	said := look()
	if len(said) != 1 || !strings.HasPrefix(said[0], corev1.EventTypeNormal+" "+ReasonTunnelWaitingForNode+" ") ||
		!strings.Contains(said[0], "reason BeginTime, expected start 2026-12-06T07:00:00Z") {
		t.Fatalf("Events %q, want one TunnelWaitingForNode with Slurm's reason and expected start", said)
	}
	if tun := shadowtest.TunnelOf(t, c, pod); tun == nil || tun.Status.WaitReason != "BeginTime" || tun.Status.ExpectedStart != "2026-12-06T07:00:00Z" {
		t.Fatalf("the Tunnel's status %+v, want waitReason BeginTime and expectedStart 2026-12-06T07:00:00Z", tun)
	}
	if again := look(); len(again) != 0 {
		t.Errorf("a second look at the same reason said %q, want nothing", again)
	}
	if err := c.Create(context.Background(), waitReasonProbe(shadowPod, "priority", priority, time.Now().Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	setWaitReasonReady(t, c, shadowPod, false)
	if said := look(); len(said) != 1 || !strings.Contains(said[0], "reason Priority, expected start 2026-12-06T09:00:00Z") {
		t.Errorf("Events %q after Slurm's reason changed, want one saying Priority and the new start", said)
	}
	if tun := shadowtest.TunnelOf(t, c, pod); tun == nil || tun.Status.WaitReason != "Priority" {
		t.Errorf("the Tunnel's status %+v, want waitReason Priority", tun)
	}
}

// A queued job's shadow pod is looked at every 10 s, but its Events are listed from the API
// server only when the wait-reason sidecar's status says there can be something new: passes
// with the sidecar ready and unchanged list nothing; a probe failure (the sidecar not ready)
// costs a list per look until it is ready again, so a reason whose Event reaches the API
// server after the sidecar's status does still arrives; a restart of shadowgate lists once.
func TestAQueuedJobsEventsAreListedOnlyWhenItsSidecarChanged(t *testing.T) {
	pod, shadowPod := queuedShadow()
	lists := 0
	c := reporterClient(t, interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*corev1.EventList); ok {
			lists++
		}
		return cl.List(ctx, list, opts...)
	}}, pod, shadowDeploymentOf("pod-uid"), shadowPod, waitReasonProbe(shadowPod, "begin", beginTime, time.Now()))
	r, _ := testReporter(t, c)
	now := time.Now()
	r.now = func() time.Time { return now }
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "user", Name: "notebook"}}
	passes := func(n int, wantReason string) {
		t.Helper()
		for range n {
			if _, err := r.Reconcile(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			now = now.Add(tunnelResync)
		}
		if tun := shadowtest.TunnelOf(t, c, pod); tun == nil || tun.Status.WaitReason != wantReason {
			t.Fatalf("the Tunnel's status %+v, want waitReason %s", tun, wantReason)
		}
	}
	passes(1, "BeginTime")
	if lists != 1 {
		t.Fatalf("the first look listed Events %d times, want 1", lists)
	}
	passes(6, "BeginTime")
	if lists != 1 {
		t.Errorf("6 looks with the sidecar ready and unchanged listed Events %d more times, want none", lists-1)
	}
	// The probe fails: the kubelet's status reaches the cache before its Event is listed.
	setWaitReasonReady(t, c, shadowPod, false)
	passes(1, "BeginTime")
	if err := c.Create(t.Context(), waitReasonProbe(shadowPod, "priority", priority, time.Now().Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	passes(1, "Priority")
	setWaitReasonReady(t, c, shadowPod, true)
	passes(6, "Priority")
	if lists != 4 {
		t.Errorf("a probe failure seen over two looks, then 6 looks ready listed Events %d times, want 3 (two while not ready, one as it is ready again)", lists-1)
	}
	lists = 0
	now = now.Add(waitEventsRefresh)
	passes(1, "Priority")
	if lists != 1 {
		t.Errorf("a look %s after the last list listed Events %d times, want 1", waitEventsRefresh, lists)
	}
	restarted, _ := testReporter(t, c)
	restarted.now = r.now
	r, lists = restarted, 0
	passes(3, "Priority")
	if lists != 1 {
		t.Errorf("a restarted reporter listed Events %d times over 3 looks, want 1", lists)
	}
}

// TunnelReady names where to reach the pod: the front door's URL when the shadow has one, in
// the Event and the Tunnel's status; without one, the kubectl port-forward of the shadow
// Service. The URL is derived from the pod and the policy, never read from a host a tenant may
// edit; an Ingress that claims the pod outside its shadow namespace, and an HTTPRoute no
// Gateway has accepted, name none.
func TestTunnelReadyNamesTheURLOrThePortForward(t *testing.T) {
	meta := func(ns, name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelPodUID: "pod-uid"},
			Annotations: map[string]string{inject.AnnotationShadowFor: "user/notebook"}}
	}
	service := &corev1.Service{ObjectMeta: meta(reporterShadowNS, reporterShadow), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8888}}}}
	ingress := func(ns, host string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: meta(ns, reporterShadow), Spec: networkingv1.IngressSpec{
			TLS: []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: reporterShadow + "-tls"}},
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: reporterShadow, Port: networkingv1.ServiceBackendPort{Number: 8888}}}}}}}}}}}
	}
	host := inject.FrontDoorHost("notebook", "user", "pod-uid", 8888, "apps.example.org")
	gateway := gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr.To(gatewayv1.Kind("Gateway")),
		Name: "apps", Namespace: ptr.To(gatewayv1.Namespace("gateways")), SectionName: ptr.To(gatewayv1.SectionName("https"))}
	// route is the shadow's HTTPRoute at generation 2 for host, whose Accepted condition from
	// parent has status accepted at generation observed.
	route := func(host string, parent gatewayv1.ParentReference, accepted metav1.ConditionStatus, observed int64) *gatewayv1.HTTPRoute {
		r := &gatewayv1.HTTPRoute{ObjectMeta: meta(reporterShadowNS, inject.RouteName(reporterShadow, 8888)), Spec: gatewayv1.HTTPRouteSpec{
			Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: reporterShadow, Port: ptr.To[gatewayv1.PortNumber](8888)}}}}}}}}
		r.Generation = 2
		r.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: parent,
			Conditions: []metav1.Condition{{Type: string(gatewayv1.RouteConditionAccepted), Status: accepted, ObservedGeneration: observed}}}}
		return r
	}
	otherGateway := *gateway.DeepCopy()
	otherGateway.Name = "tenant"
	otherListener := *gateway.DeepCopy()
	otherListener.SectionName = ptr.To(gatewayv1.SectionName("http"))
	portForward := "from your machine: kubectl port-forward -n user-shadow svc/notebook-user 8888"
	for name, c := range map[string]struct {
		objs      []client.Object
		kind      string
		wantEvent string
		wantURLs  []string
	}{
		"With a front door, TunnelReady names its HTTPS URL and the Tunnel holds it.": {
			objs:      []client.Object{service, ingress(reporterShadowNS, host)},
			wantEvent: "Tunnel ready: open https://" + host + "/; port 8888 forwarded (portforward), in the cluster at notebook-user.user-shadow.svc",
			wantURLs:  []string{"https://" + host + "/"},
		},
		"An Ingress whose host is not the pod's names no URL.": {
			objs:      []client.Object{service, ingress(reporterShadowNS, "planted.example.org")},
			wantEvent: portForward,
		},
		"While the Ingress still serves the pod's host under the domain the policy named before, no URL under the new one is named.": {
			objs:      []client.Object{service, ingress(reporterShadowNS, inject.FrontDoorHost("notebook", "user", "pod-uid", 8888, "old.example.org"))},
			wantEvent: portForward,
		},
		"With ports narrowed by interlink.eu/front-door-ports, the Tunnel holds a URL for each port published, fewer than its ports.": {
			objs: []client.Object{&corev1.Service{ObjectMeta: meta(reporterShadowNS, reporterShadow), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 6006}, {Port: 8888}}}},
				ingress(reporterShadowNS, host)},
			wantEvent: "Tunnel ready: open https://" + host + "/; port 6006, 8888 forwarded",
			wantURLs:  []string{"https://" + host + "/"},
		},
		"Without a front door, TunnelReady names the port-forward that reaches the Service.": {
			objs:      []client.Object{service},
			wantEvent: "Tunnel ready: connect to notebook-user.user-shadow.svc port 8888, forwarded (portforward); from your machine: kubectl port-forward -n user-shadow svc/notebook-user 8888",
		},
		"An Ingress claiming the pod from another namespace names no URL.": {
			objs:      []client.Object{service, ingress("evil", host)},
			wantEvent: portForward,
		},
		"An HTTPRoute the policy's Gateway accepted names the pod's URL.": {
			objs:     []client.Object{service, route(host, gateway, metav1.ConditionTrue, 2)},
			kind:     policy.FrontDoorHTTPRoute,
			wantURLs: []string{"https://" + host + "/"},
		},
		"An HTTPRoute no Gateway accepted names no URL.": {
			objs:      []client.Object{service, route(host, gateway, metav1.ConditionFalse, 2)},
			kind:      policy.FrontDoorHTTPRoute,
			wantEvent: portForward,
		},
		"An HTTPRoute another Gateway accepted names no URL.": {
			objs:      []client.Object{service, route(host, otherGateway, metav1.ConditionTrue, 2)},
			kind:      policy.FrontDoorHTTPRoute,
			wantEvent: portForward,
		},
		"An HTTPRoute another listener of the policy's Gateway accepted names no URL.": {
			objs:      []client.Object{service, route(host, otherListener, metav1.ConditionTrue, 2)},
			kind:      policy.FrontDoorHTTPRoute,
			wantEvent: portForward,
		},
		"An HTTPRoute accepted at an older generation names no URL.": {
			objs:      []client.Object{service, route(host, gateway, metav1.ConditionTrue, 1)},
			kind:      policy.FrontDoorHTTPRoute,
			wantEvent: portForward,
		},
		"An accepted HTTPRoute whose hostname is not the pod's host names no URL.": {
			objs:      []client.Object{service, route("planted.example.org", gateway, metav1.ConditionTrue, 2)},
			kind:      policy.FrontDoorHTTPRoute,
			wantEvent: portForward,
		},
	} {
		t.Run(name, func(t *testing.T) {
			pod, cl, r, recorder, req := reportingOnAReadyTunnel(t, c.objs...)
			node := policy.Defaults()
			node.Network.EnableTunnel, node.Network.ShadowMode, node.Network.WildcardDNS = true, policy.ShadowModeSSH, "*.apps.example.org"
			if c.kind != "" {
				node.Network.FrontDoor.Kind = c.kind
				node.Network.FrontDoor.Gateway = policy.GatewayRef{Name: "apps", Namespace: "gateways", SectionName: "https"}
			}
			r.policies = shadowtest.FixedPolicy{Policy: &policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"hpc-vk": node}}}
			r.identity.GatewayAPI = true
			pod.Spec.NodeName = "hpc-vk"
			if err := cl.Update(t.Context(), pod); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			select {
			case e := <-recorder.Events:
				if !strings.Contains(e, ReasonTunnelReady) || !strings.Contains(e, c.wantEvent) {
					t.Errorf("Event %q, want TunnelReady saying %q", e, c.wantEvent)
				}
			default:
				t.Fatal("no Event recorded")
			}
			tunnel := shadowtest.TunnelOf(t, cl, pod)
			if tunnel == nil || !slices.Equal(tunnel.Status.URLs, c.wantURLs) {
				t.Errorf("Tunnel %+v, want URLs %q", tunnel, c.wantURLs)
			}
		})
	}
}
