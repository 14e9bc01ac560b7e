package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/time/rate"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// The reconciler keeps to the same rule: it does not re-apply the missing shadow of such a pod,
// admitted before serve refused the copy, and says why on the pod; by default it does.
func TestReconcilerAppliesNoSecretsInThePodsNamespace(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
	p := shadowtest.Pod("notebook", map[string]string{validate.AnnotationShadowSameNS: "true"})
	for name, c := range map[string]struct {
		rules     validate.CredentialRules
		applied   int
		wantEvent bool
	}{
		"by default the missing shadow is applied again":                                        {validate.CredentialRules{}, 1, false},
		"without copies into pod namespaces it is not, and a Warning Event on the pod says why": {validate.CredentialRules{WithoutCopiesInPodNamespaces: true}, 0, true},
	} {
		applier, recorder := &shadowtest.RecordingApplier{}, &shadowtest.RecordingEvents{}
		r := newTestReconciler(time.Hour)
		r.policies = shadowtest.FixedPolicy{Policy: pol}
		r.applier = applier
		r.rules = c.rules
		r.recorder = recorder
		if _, err := r.ensure(context.Background(), shadowtest.Mutated(t, p, pol), nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(applier.Applied) != c.applied {
			t.Errorf("%s: applied %d shadows, want %d", name, len(applier.Applied), c.applied)
		}
		if got := len(recorder.Reasons) > 0; got != c.wantEvent || (got && recorder.Reasons[0] != ReasonShadowNotReapplied) {
			t.Errorf("%s: Events %q, want one %s: %v", name, recorder.Reasons, ReasonShadowNotReapplied, c.wantEvent)
		}
	}
}

// A complete shadow of a pod the rules in force refuse is left alone, and said so once on the
// pod (a Warning Event, the Refused drift state), however often the pod is reconciled.
func TestReconcilerSaysOnceThatItLeavesTheShadowOfARefusedPod(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
	p := shadowtest.Mutated(t, shadowtest.Pod("notebook", map[string]string{validate.AnnotationShadowSameNS: "true"}), pol)
	shadow := shadowtest.ShadowOf(t, p, pol)
	have := []client.Object{shadow.NodeConfigMap, shadow.Service, shadow.Deployment}
	recorder := &shadowtest.RecordingEvents{}
	r := newTestReconciler(time.Hour)
	r.policies = shadowtest.FixedPolicy{Policy: pol}
	r.applier = failingApplier{}
	r.rules = validate.CredentialRules{WithoutCopiesInPodNamespaces: true}
	r.recorder = recorder
	r.writer = shadowtest.Client(p.DeepCopy()).Build()
	r.client = r.writer
	for range 3 {
		if _, err := r.ensure(context.Background(), p, have); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(recorder.Reasons, []string{ReasonShadowRefusedByPolicy}) {
		t.Errorf("Events %q, want one %s", recorder.Reasons, ReasonShadowRefusedByPolicy)
	}
	tunnel := shadowtest.TunnelOf(t, r.writer, p)
	if tunnel == nil {
		t.Fatal("no Tunnel says the shadow is refused")
	}
	if st := drift.Of(tunnel.Status.Shadow); st.State != drift.Refused || !strings.Contains(st.Reason, "interlink.eu/shadow-same-ns") {
		t.Errorf("the Tunnel says %+v, want Refused naming the annotation", st)
	}
}

// failingApplier fails every apply: a test using it expects none.
type failingApplier struct{}

func (failingApplier) Apply(context.Context, *inject.Shadow, bool) ([]string, error) {
	return nil, errors.New("nothing should be applied")
}

// heldBy is an API server holding one Deployment, with labels.
type heldBy struct {
	client.Reader
	labels map[string]string
}

func (h heldBy) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	d := obj.(*appsv1.Deployment)
	d.Name, d.Namespace, d.Labels = key.Name, key.Namespace, h.labels
	return nil
}

// A shadow Deployment the virtual kubelet rewrote into its own (the cache of shadowgate's
// objects lost it, the name is held by one without shadowgate's label) is applied again, and
// a Warning Event on the pod names the second shadow and the VK setting to change; one that
// is merely missing is applied again without a word.
func TestReconcilerSaysWhenTheVirtualKubeletRendersASecondShadow(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
	p := shadowtest.Mutated(t, shadowtest.Pod("notebook", nil), pol)
	for name, c := range map[string]struct {
		labels    map[string]string
		wantEvent bool
	}{
		"a Deployment of the VK's holds the name":         {map[string]string{"app.kubernetes.io/component": "notebook-user"}, true},
		"shadowgate's own holds it, not yet in the cache": {map[string]string{inject.LabelManagedBy: inject.ManagedBy}, false},
	} {
		applier, recorder := &shadowtest.RecordingApplier{}, &shadowtest.RecordingEvents{}
		r := newTestReconciler(time.Hour)
		r.policies = shadowtest.FixedPolicy{Policy: pol}
		r.applier = applier
		r.reader = heldBy{labels: c.labels}
		r.recorder = recorder
		if _, err := r.ensure(context.Background(), p, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(applier.Applied) != 1 {
			t.Errorf("%s: applied %d shadows, want 1", name, len(applier.Applied))
		}
		if got := len(recorder.Reasons) == 1 && recorder.Reasons[0] == ReasonSecondShadow; got != c.wantEvent {
			t.Errorf("%s: Events %q, want one %s: %v", name, recorder.Reasons, ReasonSecondShadow, c.wantEvent)
		}
	}
}

// Past its rate, a pod the policy in force refuses is neither written nor told yet: its
// reconcile comes back when a write is free, and then says it once.
func TestDriftWritesAreHeldBackPastTheirRate(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
	const burst = 2
	recorder := &shadowtest.RecordingEvents{}
	r := newTestReconciler(time.Hour)
	r.policies, r.applier, r.recorder = shadowtest.FixedPolicy{Policy: pol}, failingApplier{}, recorder
	r.rules = validate.CredentialRules{WithoutCopiesInPodNamespaces: true}
	r.driftWrites = rate.NewLimiter(rate.Every(time.Minute), burst)
	var pods []*corev1.Pod
	var stored []client.Object
	for i := range burst + 1 {
		p := shadowtest.Mutated(t, shadowtest.Pod(fmt.Sprintf("notebook-%d", i), map[string]string{validate.AnnotationShadowSameNS: "true"}), pol)
		p.UID = types.UID(fmt.Sprintf("uid-%d", i))
		pods, stored = append(pods, p), append(stored, p.DeepCopy())
	}
	r.writer = shadowtest.Client().WithObjects(stored...).Build()
	r.client = r.writer
	var held []time.Duration
	for _, p := range pods {
		shadow := shadowtest.ShadowOf(t, p, pol)
		wait, err := r.ensure(context.Background(), p, []client.Object{shadow.NodeConfigMap, shadow.Service, shadow.Deployment})
		if err != nil {
			t.Fatal(err)
		}
		if wait > 0 {
			held = append(held, wait)
		}
	}
	if len(held) != 1 || held[0] > time.Minute {
		t.Errorf("held back %v, want one write for at most the minute a token takes", held)
	}
	if len(recorder.Reasons) != burst {
		t.Errorf("%d Events, want %d: the held-back pod is told when its write is made", len(recorder.Reasons), burst)
	}
}
