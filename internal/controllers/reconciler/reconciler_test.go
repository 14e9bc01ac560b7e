package reconciler

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

func newTestReconciler(grace time.Duration) *Reconciler {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		panic(err)
	}
	return &Reconciler{grace: grace, gone: map[types.UID]time.Time{}, orphaned: map[types.UID]time.Time{},
		pacer: newRollPacer(5, m, func(types.NamespacedName) {}), drifts: map[types.UID]drift.Status{},
		driftWrites: newDriftWrites(), writeTurns: map[types.UID]time.Time{}}
}

// A shadow whose pod was never seen waits the grace period from when it was first found
// orphaned; one whose pod was seen deleted goes at once.
func TestOrphanWait(t *testing.T) {
	r := newTestReconciler(2 * time.Minute)
	now := time.Now()
	if w := r.orphanWait("never-stored", now); w != 2*time.Minute {
		t.Errorf("first sight: wait %s", w)
	}
	if w := r.orphanWait("never-stored", now.Add(90*time.Second)); w != 30*time.Second {
		t.Errorf("later: wait %s", w)
	}
	if w := r.orphanWait("never-stored", now.Add(3*time.Minute)); w > 0 {
		t.Errorf("after the grace period: wait %s", w)
	}
	r.podDeleted("deleted")
	if w := r.orphanWait("deleted", now); w > 0 {
		t.Errorf("a pod seen deleted: wait %s", w)
	}
}

// A shadow found orphaned before its pod was stored is not counted as orphaned once the
// pod shows up, so a later orphaning starts a fresh grace period.
func TestAdoptedShadowStartsAFreshGracePeriod(t *testing.T) {
	r := newTestReconciler(time.Minute)
	now := time.Now()
	r.orphanWait("uid", now)
	r.adopted("uid")
	if w := r.orphanWait("uid", now.Add(10*time.Minute)); w != time.Minute {
		t.Errorf("wait %s, want a full grace period", w)
	}
}

func TestPruneForgetsWhatNoLongerMatters(t *testing.T) {
	r := newTestReconciler(time.Minute)
	now := time.Now()
	r.gone["old"] = now.Add(-2 * time.Minute)
	r.gone["new"] = now
	r.orphaned["old"] = now.Add(-3 * time.Minute)
	r.orphaned["new"] = now.Add(-90 * time.Second)
	r.prune(now)
	if _, ok := r.gone["old"]; ok {
		t.Error("kept a deletion older than the grace period")
	}
	if _, ok := r.orphaned["old"]; ok {
		t.Error("kept an orphan older than twice the grace period")
	}
	if _, ok := r.gone["new"]; !ok {
		t.Error("forgot a recent deletion")
	}
	if _, ok := r.orphaned["new"]; !ok {
		t.Error("forgot an orphan still within twice the grace period")
	}
}

// Two reconciles of one pod can race to delete the same object: only the one whose call
// deleted it says so, and the other's NotFound is no error.
func TestDeleteObjectSaysWhetherItDeleted(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trainer-user-node", Namespace: "user-shadow"}}
	r := newTestReconciler(time.Minute)
	r.client = shadowtest.Client().WithObjects(cm.DeepCopy()).Build()
	stored := &corev1.ConfigMap{}
	if err := r.client.Get(t.Context(), client.ObjectKeyFromObject(cm), stored); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		deleted, err := r.deleteObject(t.Context(), stored.DeepCopy())
		if err != nil || deleted != want {
			t.Errorf("delete %d: got deleted=%v, err=%v; want deleted=%v and no error", i+1, deleted, err, want)
		}
	}
}

// A finished pod (Succeeded or Failed) counts as gone: its shadow objects are deleted at
// once, though the pod is stored and the grace period is long, and none is applied again.
// A running pod keeps its shadow and has what is missing of it re-applied.
func TestReconcilerDeletesTheShadowOfAFinishedPod(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
	p := shadowtest.Mutated(t, shadowtest.Pod("trainer", nil), pol)
	shadow := shadowtest.ShadowOf(t, p, pol)
	if shadow == nil || shadow.Service == nil {
		t.Fatal("the test pod has no shadow with a Service")
	}
	for name, c := range map[string]struct {
		phase          corev1.PodPhase
		deploymentGone bool // deleted beforehand, as an admin would
		wantKept       bool
		wantApplied    int
	}{
		"a running pod keeps its shadow":                         {corev1.PodRunning, false, true, 0},
		"a running pod has its deleted Deployment re-applied":    {corev1.PodRunning, true, true, 1},
		"a succeeded pod's shadow is deleted":                    {corev1.PodSucceeded, false, false, 0},
		"a failed pod's shadow is deleted":                       {corev1.PodFailed, false, false, 0},
		"a succeeded pod's deleted Deployment is not re-applied": {corev1.PodSucceeded, true, false, 0},
	} {
		stored := p.DeepCopy()
		stored.Status.Phase = c.phase
		objs := []client.Object{stored, shadow.NodeConfigMap.DeepCopy(), shadow.Service.DeepCopy(), shadow.NetworkPolicy.DeepCopy()}
		if !c.deploymentGone {
			objs = append(objs, shadow.Deployment.DeepCopy())
		}
		b := shadowtest.Client().WithObjects(objs...)
		for _, kind := range shadows.Objects(false) {
			b = b.WithIndex(kind, shadows.IndexShadowFor, shadows.ShadowForIndex)
		}
		applier := &shadowtest.RecordingApplier{}
		r := newTestReconciler(time.Hour)
		r.client, r.policies, r.applier, r.recorder = b.Build(), shadowtest.FixedPolicy{Policy: pol}, applier, &shadowtest.RecordingEvents{}
		r.identity = shadows.Identity{Cache: r.client, Namespaces: shadowtest.NamespaceLabels{shadow.Deployment.Namespace: {inject.LabelShadowNamespaceFor: p.Namespace}}}
		res, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.RequeueAfter != 0 {
			t.Errorf("%s: requeued after %s: nothing should wait for the grace period", name, res.RequeueAfter)
		}
		for _, obj := range []client.Object{shadow.NodeConfigMap, shadow.Service} {
			err := r.client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
			if kept := err == nil; kept != c.wantKept || (err != nil && !apierrors.IsNotFound(err)) {
				t.Errorf("%s: %s %s kept %v (%v), want kept %v", name, r.objectKind(obj), obj.GetName(), kept, err, c.wantKept)
			}
		}
		if !c.deploymentGone {
			err := r.client.Get(t.Context(), client.ObjectKeyFromObject(shadow.Deployment), &appsv1.Deployment{})
			if kept := err == nil; kept != c.wantKept {
				t.Errorf("%s: Deployment kept %v (%v), want kept %v", name, kept, err, c.wantKept)
			}
		}
		if len(applier.Applied) != c.wantApplied {
			t.Errorf("%s: applied %d shadows, want %d", name, len(applier.Applied), c.wantApplied)
		} else if c.wantApplied == 1 && (applier.Applied[0].Deployment == nil || applier.Applied[0].Service != nil || applier.Applied[0].NodeConfigMap != nil) {
			t.Errorf("%s: applied %+v, want the Deployment alone", name, applier.Applied[0])
		}
		if len(r.orphaned) > 0 {
			t.Errorf("%s: the shadow of a stored pod was counted as orphaned: %v", name, r.orphaned)
		}
	}
}

// A shadow rendered under another policy is applied again whole but for its node ConfigMap,
// which holds the compute node; then, once its Deployment has replaced the shadow pod, the
// pod is told so once and the drift state goes. A current shadow writes nothing.
func TestReconcilerRollsAShadowRenderedUnderAnotherPolicy(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
	p := shadowtest.Mutated(t, shadowtest.Pod("notebook", nil), pol)
	shadow := shadowtest.ShadowOf(t, p, pol)
	for sentence, tc := range map[string]struct {
		hash        string
		wantApplied int
	}{
		"a current shadow is left alone":          {shadow.Deployment.Annotations[inject.AnnotationRendered], 0},
		"a shadow rendered differently is rolled": {"0123456789abcdef", 1},
		"a shadow from before hashes is rolled":   {"", 1},
	} {
		t.Run(sentence, func(t *testing.T) {
			d := shadow.Deployment.DeepCopy()
			d.Generation = 1
			d.Annotations[inject.AnnotationRendered] = tc.hash
			have := []client.Object{shadow.NodeConfigMap, shadow.Service, shadow.NetworkPolicy, d}
			applier, recorder := &shadowtest.RecordingApplier{}, &shadowtest.RecordingEvents{}
			r := newTestReconciler(time.Hour)
			r.policies, r.applier, r.recorder = shadowtest.FixedPolicy{Policy: pol}, applier, recorder
			r.writer = shadowtest.Client(p.DeepCopy()).Build()
			r.client = r.writer // no shadow pod: the roll is over once the new one is available
			if _, err := r.ensure(t.Context(), p, have); err != nil {
				t.Fatal(err)
			}
			if len(applier.Applied) != tc.wantApplied {
				t.Fatalf("applied %d shadows, want %d", len(applier.Applied), tc.wantApplied)
			}
			if tc.wantApplied == 0 {
				if len(recorder.Reasons) > 0 {
					t.Errorf("Events %q on a pod whose shadow is current", recorder.Reasons)
				}
				return
			}
			if got := applier.Applied[0]; got.NodeConfigMap != nil || got.Deployment == nil || got.Service == nil || got.NetworkPolicy == nil {
				t.Errorf("rolled %+v, want all but the node ConfigMap", got)
			}
			// The cache shows the apply: a new generation, its pod being replaced, then available.
			rolled := shadow.Deployment.DeepCopy()
			rolled.Generation = 2
			rolled.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1}
			have[3] = rolled
			for range 2 {
				if _, err := r.ensure(t.Context(), p, have); err != nil {
					t.Fatal(err)
				}
			}
			rolled.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
			if _, err := r.ensure(t.Context(), p, have); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(recorder.Reasons, []string{ReasonShadowRolled}) {
				t.Errorf("Events %q, want one %s", recorder.Reasons, ReasonShadowRolled)
			}
			if len(applier.Applied) != 1 {
				t.Errorf("applied %d times, want once", len(applier.Applied))
			}
			tunnel := shadowtest.TunnelOf(t, r.writer, p)
			if tunnel == nil {
				t.Fatal("no Tunnel says how the roll went")
			}
			if st := drift.Of(tunnel.Status.Shadow); st.State != drift.Current {
				t.Errorf("the Tunnel says %+v of a shadow that is current", st)
			}
		})
	}
}

// Where a roll stands, a new leader reads on the shadow Deployment, never in what was said
// about it: a pod whose Tunnel says Rolling takes no slot while its shadow's Deployment is
// settled, and one whose Deployment replaces its pod for a later pod template holds one,
// whatever its Tunnel says. Starting a held shadow is no roll.
func TestANewLeaderAdoptsRollsFromTheDeploymentNotThePod(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
	for sentence, tc := range map[string]struct {
		said       drift.State // in the pod's Tunnel, "" for none
		rollingOut bool
		revision   string // the Deployment controller's deployment.kubernetes.io/revision
		wantHeld   bool
	}{
		"A pod whose Tunnel says Rolling, its Deployment settled, holds no slot.": {
			said: drift.Rolling},
		"A Deployment replacing its pod for a later pod template holds a slot, its pod saying nothing.": {
			rollingOut: true, revision: "2", wantHeld: true},
		"A held shadow started for its stored pod, its first pod template still, holds no slot.": {
			rollingOut: true, revision: "1"},
	} {
		t.Run(sentence, func(t *testing.T) {
			p := shadowtest.Mutated(t, shadowtest.Pod("notebook", nil), pol)
			shadow := shadowtest.ShadowOf(t, p, pol)
			objs := []client.Object{p.DeepCopy()}
			if tc.said != "" {
				objs = append(objs, shadowtest.TunnelSaying(p, v1alpha1.TunnelStatus{Shadow: drift.Status{State: tc.said}.API()}))
			}
			d := shadow.Deployment.DeepCopy()
			d.Generation = 3
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
			if tc.rollingOut {
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 1}
			}
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, "deployment.kubernetes.io/revision", tc.revision)
			r := newTestReconciler(time.Hour)
			r.pacer = newRollPacer(1, r.pacer.metrics, func(types.NamespacedName) {})
			r.policies, r.applier, r.recorder = shadowtest.FixedPolicy{Policy: pol}, &shadowtest.RecordingApplier{}, &shadowtest.RecordingEvents{}
			r.writer = shadowtest.Client(objs...).Build()
			r.client = r.writer
			if _, err := r.ensure(t.Context(), p, []client.Object{shadow.NodeConfigMap, shadow.Service, shadow.NetworkPolicy, d}); err != nil {
				t.Fatal(err)
			}
			other := r.pacer.take("other", types.NamespacedName{Namespace: "user", Name: "other"}, "h", 1, true, time.Now())
			if held := other == turnWait; held != tc.wantHeld {
				t.Errorf("the one slot held: %v, want %v", held, tc.wantHeld)
			}
		})
	}
}

// The front door is part of a live pod's shadow: an Ingress, or an HTTPRoute, deleted while
// the pod runs is applied again, and nothing else of the shadow with it.
func TestAFrontDoorDeletedWhileItsPodRunsIsReapplied(t *testing.T) {
	for name, door := range map[string]string{
		"Ingress":   "FrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n      IngressClusterIssuer: letsencrypt\n",
		"HTTPRoute": "FrontDoor: {Kind: HTTPRoute, Gateway: {Name: public, Namespace: gateways, SectionName: https}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			cm := shadowtest.ExamplePolicyConfigMap(t, func(doc string) string {
				edited := strings.Replace(doc, "  hpc-vk:\n    Network:\n", "  hpc-vk:\n    Network:\n      WildcardDNS: apps.example.org\n      "+door, 1)
				if edited == doc {
					t.Fatal("the example policy has no hpc-vk Network block to add a front door to")
				}
				return edited
			})
			pol, errs := validate.PolicyConfigMap(cm, validate.CredentialRules{})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			p := shadowtest.Mutated(t, shadowtest.Pod("trainer", nil), pol)
			p.Status.Phase = corev1.PodRunning
			shadow := shadowtest.ShadowOf(t, p, pol)
			if (shadow.Ingress == nil) == (len(shadow.HTTPRoutes) == 0) {
				t.Fatalf("the shadow has Ingress %v and HTTPRoutes %v, want the one of kind %s", shadow.Ingress, shadow.HTTPRoutes, name)
			}
			b := shadowtest.Client().WithObjects(p, shadow.NodeConfigMap.DeepCopy(), shadow.Service.DeepCopy(), shadow.NetworkPolicy.DeepCopy(), shadow.Deployment.DeepCopy())
			for _, kind := range shadows.Objects(true) {
				b = b.WithIndex(kind, shadows.IndexShadowFor, shadows.ShadowForIndex)
			}
			applier := &shadowtest.RecordingApplier{}
			r := newTestReconciler(time.Hour)
			r.client, r.policies, r.applier, r.recorder = b.Build(), shadowtest.FixedPolicy{Policy: pol}, applier, &shadowtest.RecordingEvents{}
			r.identity = shadows.Identity{Cache: r.client, GatewayAPI: true,
				Namespaces: shadowtest.NamespaceLabels{shadow.Deployment.Namespace: {inject.LabelShadowNamespaceFor: p.Namespace}}}
			if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
				t.Fatal(err)
			}
			if len(applier.Applied) != 1 {
				t.Fatalf("applied %d shadows, want the front door once", len(applier.Applied))
			}
			got := applier.Applied[0]
			if got.Deployment != nil || got.Service != nil || got.NodeConfigMap != nil || got.NetworkPolicy != nil ||
				(got.Ingress == nil) != (shadow.Ingress == nil) || len(got.HTTPRoutes) != len(shadow.HTTPRoutes) {
				t.Errorf("applied %+v, want the front door alone", got)
			}
		})
	}
}

// A front door the policy in force no longer gives a live pod (turned off, or of another
// kind, or the pod now refused) is deleted, and only the pod's own: an Ingress of another pod
// UID at the same name is left to the orphan rules.
func TestAFrontDoorThePolicyNoLongerGivesIsDeleted(t *testing.T) {
	withDoor := func(door string) *policy.Policy {
		cm := shadowtest.ExamplePolicyConfigMap(t, func(doc string) string {
			if door == "" {
				return doc
			}
			return strings.Replace(doc, "  hpc-vk:\n    Network:\n", "  hpc-vk:\n    Network:\n      WildcardDNS: apps.example.org\n      "+door, 1)
		})
		pol, errs := validate.PolicyConfigMap(cm, validate.CredentialRules{})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return pol
	}
	ingressDoor := withDoor("FrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n      IngressClusterIssuer: letsencrypt\n")
	for name, c := range map[string]struct {
		now         *policy.Policy
		annotations map[string]string
		wantKept    bool
	}{
		"Turned off, the Ingress is deleted.": {now: withDoor("")},
		// The pod narrows the front door's ports, which a node without one refuses: the pod and
		// the rest of its shadow stay as they are, the front door goes.
		"Turned off under a pod the policy now refuses, the Ingress is deleted.": {now: withDoor(""),
			annotations: map[string]string{validate.AnnotationFrontDoorPorts: "8888"}},
		"Made an HTTPRoute, the Ingress is deleted.": {
			now: withDoor("FrontDoor: {Kind: HTTPRoute, Gateway: {Name: public, Namespace: gateways, SectionName: https}}\n")},
		"Still an Ingress, it is kept.": {now: ingressDoor, wantKept: true},
	} {
		t.Run(name, func(t *testing.T) {
			p := shadowtest.Mutated(t, shadowtest.Pod("trainer", c.annotations), ingressDoor)
			p.Status.Phase = corev1.PodRunning
			before := shadowtest.ShadowOf(t, p, ingressDoor)
			b := shadowtest.Client().WithObjects(p, before.NodeConfigMap.DeepCopy(), before.Service.DeepCopy(), before.NetworkPolicy.DeepCopy(),
				before.Deployment.DeepCopy(), before.Ingress.DeepCopy())
			for _, kind := range shadows.Objects(true) {
				b = b.WithIndex(kind, shadows.IndexShadowFor, shadows.ShadowForIndex)
			}
			r := newTestReconciler(time.Hour)
			r.client, r.policies, r.applier, r.recorder = b.Build(), shadowtest.FixedPolicy{Policy: c.now}, &shadowtest.RecordingApplier{}, &shadowtest.RecordingEvents{}
			r.writer = r.client
			r.identity = shadows.Identity{Cache: r.client, GatewayAPI: true,
				Namespaces: shadowtest.NamespaceLabels{before.Deployment.Namespace: {inject.LabelShadowNamespaceFor: p.Namespace}}}
			if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
				t.Fatal(err)
			}
			err := r.client.Get(t.Context(), client.ObjectKeyFromObject(before.Ingress), &networkingv1.Ingress{})
			if kept := err == nil; kept != c.wantKept {
				t.Errorf("the Ingress kept %v (%v), want kept %v", kept, err, c.wantKept)
			}
			if err := r.client.Get(t.Context(), client.ObjectKeyFromObject(before.Service), &corev1.Service{}); err != nil {
				t.Errorf("the shadow's Service went with the front door: %v", err)
			}
		})
	}
}
