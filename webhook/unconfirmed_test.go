package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
)

func testUnconfirmed(t *testing.T, limit, perNamespace int) (*unconfirmedShadows, *time.Time) {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	u := newUnconfirmedShadows(limit, perNamespace, time.Minute, m)
	u.now = func() time.Time { return now }
	return u, &now
}

// A limit of 3, a namespace's share 2; pods are "<namespace>/<uid>".
func TestUnconfirmedShadowsAreBoundedWithAShareForEachNamespace(t *testing.T) {
	reserve := func(u *unconfirmedShadows, pods ...string) {
		for _, p := range pods {
			ns, uid, _ := strings.Cut(p, "/")
			if err := u.reserve(types.UID(uid), ns); err != nil {
				t.Fatalf("reserving %s: %v", p, err)
			}
		}
	}
	for name, c := range map[string]struct {
		steps     func(u *unconfirmedShadows, now *time.Time)
		next      string // reserved last
		refused   *TooManyUnconfirmedError
		wantCount int
	}{
		"The shadow past the limit is refused, naming the namespace holding the most.": {
			steps: func(u *unconfirmedShadows, _ *time.Time) { reserve(u, "b/1", "a/2", "a/3") },
			next:  "c/4", refused: &TooManyUnconfirmedError{Namespace: "a", Held: 2, Limit: 3}, wantCount: 3,
		},
		"Past its share a namespace is refused, naming itself, while the limit has room.": {
			steps: func(u *unconfirmedShadows, _ *time.Time) { reserve(u, "a/1", "a/2") },
			next:  "a/3", refused: &TooManyUnconfirmedError{Namespace: "a", Held: 2, Limit: 2, Share: true}, wantCount: 2,
		},
		"Another namespace is admitted while one holds its whole share.": {
			steps: func(u *unconfirmedShadows, _ *time.Time) { reserve(u, "a/1", "a/2") },
			next:  "b/3", wantCount: 3,
		},
		"A namespace refused its share is refused again until its pods are stored.": {
			steps: func(u *unconfirmedShadows, _ *time.Time) {
				reserve(u, "a/1", "a/2")
				_ = u.reserve("3", "a")
			},
			next: "a/4", refused: &TooManyUnconfirmedError{Namespace: "a", Held: 2, Limit: 2, Share: true}, wantCount: 2,
		},
		"A stored pod frees its place in its namespace's share.": {
			steps: func(u *unconfirmedShadows, _ *time.Time) { reserve(u, "a/1", "a/2"); u.release("1") },
			next:  "a/3", wantCount: 2,
		},
		"A stored pod frees its place under the limit.": {
			steps: func(u *unconfirmedShadows, _ *time.Time) { reserve(u, "a/1", "b/2", "c/3"); u.release("2") },
			next:  "d/4", wantCount: 3,
		},
		"A shadow older than the grace period no longer counts: the reconciler has collected it.": {
			steps: func(u *unconfirmedShadows, now *time.Time) {
				reserve(u, "a/1")
				*now = now.Add(30 * time.Second)
				reserve(u, "a/2")
				*now = now.Add(31 * time.Second)
			},
			next: "a/3", wantCount: 2,
		},
		"A pod's admission tried again takes its own place.": {
			steps: func(u *unconfirmedShadows, _ *time.Time) { reserve(u, "a/1", "a/2") },
			next:  "a/2", wantCount: 2,
		},
		"Releasing a pod never counted changes nothing.": {
			steps: func(u *unconfirmedShadows, _ *time.Time) { reserve(u, "a/1", "a/2"); u.release("z") },
			next:  "a/3", refused: &TooManyUnconfirmedError{Namespace: "a", Held: 2, Limit: 2, Share: true}, wantCount: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			u, now := testUnconfirmed(t, 3, 2)
			c.steps(u, now)
			before := testutil.ToFloat64(u.metrics.UnconfirmedRefusals)
			ns, uid, _ := strings.Cut(c.next, "/")
			err := u.reserve(types.UID(uid), ns)
			if c.refused != nil {
				var tooMany *TooManyUnconfirmedError
				if !errors.As(err, &tooMany) {
					t.Fatalf("reserve %s: %v, want a TooManyUnconfirmedError", c.next, err)
				}
				c.refused.Within = time.Minute
				if *tooMany != *c.refused {
					t.Errorf("refused with %+v, want %+v", *tooMany, *c.refused)
				}
				if got := testutil.ToFloat64(u.metrics.UnconfirmedRefusals) - before; got != 1 {
					t.Errorf("refusals counted %v, want 1", got)
				}
			} else if err != nil {
				t.Fatalf("reserve %s: %v", c.next, err)
			}
			if got := testutil.ToFloat64(u.metrics.Unconfirmed); got != float64(c.wantCount) {
				t.Errorf("shadowgate_unconfirmed_shadows is %v, want %d", got, c.wantCount)
			}
			counted := 0
			for _, n := range u.held {
				counted += n
			}
			if counted != len(u.pending) {
				t.Errorf("the namespaces hold %d places, %d are pending: %v", counted, len(u.pending), u.held)
			}
		})
	}
}

func TestTheUnconfirmedRefusalIsA429NamingTheNamespaceAndWhatToDo(t *testing.T) {
	for name, c := range map[string]struct {
		err  *TooManyUnconfirmedError
		want []string
	}{
		"The replica's limit names the flag and the namespace holding the most.": {
			err:  &TooManyUnconfirmedError{Namespace: "greedy", Held: 120, Limit: 200, Within: 2 * time.Minute},
			want: []string{"200", "--max-unconfirmed-shadows)", `namespace "greedy" holds 120`, "resourcequota -n \"greedy\"", "2m0s", "Try again", "Who can call the webhook"},
		},
		"A namespace's share names the flag and the namespace.": {
			err:  &TooManyUnconfirmedError{Namespace: "greedy", Held: 50, Limit: 50, Share: true, Within: 2 * time.Minute},
			want: []string{`namespace "greedy" holds 50`, "--max-unconfirmed-shadows-per-namespace", "resourcequota -n \"greedy\"", "2m0s", "Try again"},
		},
		"A namespace no API server would send is quoted printable.": {
			err:  &TooManyUnconfirmedError{Namespace: "a\x1b[2Jb", Held: 1, Limit: 1, Share: true, Within: time.Minute},
			want: []string{`"a\x1b[2Jb"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			resp := refuseForShadow(c.err, nil)
			if resp.Allowed || resp.Result.Code != http.StatusTooManyRequests || resp.Result.Reason != metav1.StatusReasonTooManyRequests {
				t.Fatalf("refusal %+v, want a 429 TooManyRequests", resp.Result)
			}
			for _, want := range c.want {
				if !strings.Contains(resp.Result.Message, want) {
					t.Errorf("the refusal does not say %q: %s", want, resp.Result.Message)
				}
			}
			if strings.ContainsRune(resp.Result.Message, 0x1b) {
				t.Errorf("the refusal holds a control character: %q", resp.Result.Message)
			}
		})
	}
}

func TestTheBoundCountsOnlyAdmissionsThatWrite(t *testing.T) {
	shadowOf := func(uid string) *inject.Shadow {
		return &inject.Shadow{Deployment: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{inject.LabelPodUID: uid}, Annotations: map[string]string{inject.AnnotationShadowFor: "team/" + uid}},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		}}
	}
	for name, c := range map[string]struct {
		applyErr  error
		dryRun    bool
		wantCount int
	}{
		"An applied shadow counts until its pod is stored.": {wantCount: 1},
		"A dry run writes nothing and does not count.":      {dryRun: true},
		"A shadow that failed to apply does not count: what it created is removed.": {
			applyErr: apierrors.NewInternalError(errors.New("boom")),
		},
	} {
		t.Run(name, func(t *testing.T) {
			u, _ := testUnconfirmed(t, 1, 1)
			inner := &shadowtest.RecordingApplier{Err: c.applyErr}
			b := boundedApplier{applier: inner, unconfirmed: u}
			if _, err := b.Apply(context.Background(), shadowOf("a"), c.dryRun); !errors.Is(err, c.applyErr) {
				t.Fatalf("Apply: %v, want %v", err, c.applyErr)
			}
			if got := len(u.pending); got != c.wantCount {
				t.Errorf("%d shadows counted, want %d", got, c.wantCount)
			}
			if len(inner.Applied) != 1 {
				t.Fatalf("the Applier was called %d times, want 1", len(inner.Applied))
			}
			if c.wantCount == 1 && u.held["team"] != 1 {
				t.Errorf("namespaces hold %v, want the pod's namespace team to hold its place", u.held)
			}
			d := inner.Applied[0].Deployment
			_, held := d.Labels[applier.LabelAwaitingPod]
			if wantHeld := !c.dryRun; held != wantHeld || (*d.Spec.Replicas == 0) != wantHeld {
				t.Errorf("applied with %d replicas and labels %v; want held (no replicas, %s) %v", *d.Spec.Replicas, d.Labels, applier.LabelAwaitingPod, wantHeld)
			}
		})
	}
	t.Run("Past the limit the Applier is not called.", func(t *testing.T) {
		u, _ := testUnconfirmed(t, 1, 1)
		inner := &shadowtest.RecordingApplier{}
		b := boundedApplier{applier: inner, unconfirmed: u}
		_, _ = b.Apply(context.Background(), shadowOf("a"), false)
		if _, err := b.Apply(context.Background(), shadowOf("b"), false); err == nil {
			t.Fatal("the second shadow was admitted past a limit of 1")
		}
		if len(inner.Applied) != 1 {
			t.Errorf("the Applier was called %d times, want 1", len(inner.Applied))
		}
	})
}

// A held shadow is started once its pod is stored, with the replicas the policy renders; one
// scaled down by hand stays as it is, and one deleted meanwhile is no error.
func TestAStoredPodsHeldShadowIsStarted(t *testing.T) {
	want := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	deployment := func(labels map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-shadow", Name: "shadow", Labels: labels, ResourceVersion: "7"},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)},
		}
	}
	for name, c := range map[string]struct {
		stored       *appsv1.Deployment // nil: deleted meanwhile
		seen         *appsv1.Deployment
		wantReplicas int32
	}{
		"A shadow held at admission is started, and no longer marked held.": {
			stored: deployment(map[string]string{applier.LabelAwaitingPod: "true", "keep": "me"}), seen: deployment(map[string]string{applier.LabelAwaitingPod: "true", "keep": "me"}),
			wantReplicas: 1,
		},
		"A shadow scaled down by hand stays down.": {
			stored: deployment(map[string]string{"keep": "me"}), seen: deployment(map[string]string{"keep": "me"}),
		},
		"A held shadow deleted meanwhile is no error.": {
			seen: deployment(map[string]string{applier.LabelAwaitingPod: "true"}),
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			if c.stored != nil {
				b = b.WithObjects(c.stored)
			}
			cl := b.Build()
			if c.stored != nil {
				if err := cl.Get(t.Context(), client.ObjectKeyFromObject(c.stored), c.seen); err != nil {
					t.Fatal(err)
				}
			}
			if err := applier.StartShadow(t.Context(), cl, c.seen, want); err != nil {
				t.Fatalf("startShadow: %v", err)
			}
			if c.stored == nil {
				return
			}
			got := &appsv1.Deployment{}
			if err := cl.Get(t.Context(), client.ObjectKeyFromObject(c.stored), got); err != nil {
				t.Fatal(err)
			}
			if _, held := got.Labels[applier.LabelAwaitingPod]; *got.Spec.Replicas != c.wantReplicas || held || got.Labels["keep"] != "me" {
				t.Errorf("stored with %d replicas and labels %v, want %d replicas, not held, other labels kept", *got.Spec.Replicas, got.Labels, c.wantReplicas)
			}
		})
	}
	t.Run("A shadow changed since it was read is not written over.", func(t *testing.T) {
		stored := deployment(map[string]string{applier.LabelAwaitingPod: "true"})
		cl := fake.NewClientBuilder().WithObjects(stored).Build()
		seen := &appsv1.Deployment{}
		if err := cl.Get(t.Context(), client.ObjectKeyFromObject(stored), seen); err != nil {
			t.Fatal(err)
		}
		seen.ResourceVersion = "1"
		if err := applier.StartShadow(t.Context(), cl, seen, want); !apierrors.IsConflict(err) {
			t.Errorf("startShadow over a changed Deployment: %v, want a conflict", err)
		}
	})
}
