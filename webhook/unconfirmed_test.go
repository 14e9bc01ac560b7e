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

	"github.com/interlink-hq/shadowgate/inject"
)

func testUnconfirmed(t *testing.T, limit int) (*unconfirmedShadows, *time.Time) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	u := newUnconfirmedShadows(limit, time.Minute, m)
	u.now = func() time.Time { return now }
	return u, &now
}

func TestUnconfirmedShadowsAreBounded(t *testing.T) {
	for name, c := range map[string]struct {
		steps     func(u *unconfirmedShadows, now *time.Time)
		refused   types.UID // reserved last; "" when it must be admitted
		admitted  types.UID
		wantCount int
	}{
		"The shadow past the limit is refused.": {
			steps:   func(u *unconfirmedShadows, _ *time.Time) { _ = u.reserve("a"); _ = u.reserve("b") },
			refused: "c", wantCount: 2,
		},
		"A stored pod frees its place.": {
			steps:    func(u *unconfirmedShadows, _ *time.Time) { _ = u.reserve("a"); _ = u.reserve("b"); u.release("a") },
			admitted: "c", wantCount: 2,
		},
		"A shadow older than the grace period no longer counts: the reconciler has collected it.": {
			steps: func(u *unconfirmedShadows, now *time.Time) {
				_ = u.reserve("a")
				*now = now.Add(30 * time.Second)
				_ = u.reserve("b")
				*now = now.Add(31 * time.Second)
			},
			admitted: "c", wantCount: 2,
		},
		"A pod's admission tried again takes its own place.": {
			steps:    func(u *unconfirmedShadows, _ *time.Time) { _ = u.reserve("a"); _ = u.reserve("b") },
			admitted: "b", wantCount: 2,
		},
		"Releasing a pod never counted changes nothing.": {
			steps:   func(u *unconfirmedShadows, _ *time.Time) { _ = u.reserve("a"); _ = u.reserve("b"); u.release("z") },
			refused: "c", wantCount: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			u, now := testUnconfirmed(t, 2)
			c.steps(u, now)
			if c.refused != "" {
				err := u.reserve(c.refused)
				var tooMany *TooManyUnconfirmedError
				if !errors.As(err, &tooMany) {
					t.Fatalf("reserve past the limit: %v, want a TooManyUnconfirmedError", err)
				}
				if got := testutil.ToFloat64(u.metrics.unconfirmedRefusals); got != 1 {
					t.Errorf("refusals counted %v, want 1", got)
				}
			} else if err := u.reserve(c.admitted); err != nil {
				t.Fatalf("reserve: %v", err)
			}
			if got := testutil.ToFloat64(u.metrics.unconfirmed); got != float64(c.wantCount) {
				t.Errorf("shadowgate_unconfirmed_shadows is %v, want %d", got, c.wantCount)
			}
		})
	}
}

func TestTheUnconfirmedRefusalIsA429NamingTheFlagAndWhatToDo(t *testing.T) {
	err := &TooManyUnconfirmedError{Limit: 200, Within: 2 * time.Minute}
	resp := refuseForShadow(err, nil)
	if resp.Allowed || resp.Result.Code != http.StatusTooManyRequests || resp.Result.Reason != metav1.StatusReasonTooManyRequests {
		t.Fatalf("refusal %+v, want a 429 TooManyRequests", resp.Result)
	}
	for _, want := range []string{"200", "--max-unconfirmed-shadows", "2m0s", "try again", "who calls"} {
		if !strings.Contains(resp.Result.Message, want) {
			t.Errorf("the refusal does not say %q: %s", want, resp.Result.Message)
		}
	}
}

func TestTheBoundCountsOnlyAdmissionsThatWrite(t *testing.T) {
	shadowOf := func(uid string) *inject.Shadow {
		return &inject.Shadow{Deployment: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{inject.LabelPodUID: uid}}}}
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
			u, _ := testUnconfirmed(t, 1)
			inner := &recordingApplier{err: c.applyErr}
			b := boundedApplier{applier: inner, unconfirmed: u}
			if _, err := b.Apply(context.Background(), shadowOf("a"), c.dryRun); !errors.Is(err, c.applyErr) {
				t.Fatalf("Apply: %v, want %v", err, c.applyErr)
			}
			if got := len(u.pending); got != c.wantCount {
				t.Errorf("%d shadows counted, want %d", got, c.wantCount)
			}
			if len(inner.applied) != 1 {
				t.Errorf("the Applier was called %d times, want 1", len(inner.applied))
			}
		})
	}
	t.Run("Past the limit the Applier is not called.", func(t *testing.T) {
		u, _ := testUnconfirmed(t, 1)
		inner := &recordingApplier{}
		b := boundedApplier{applier: inner, unconfirmed: u}
		_, _ = b.Apply(context.Background(), shadowOf("a"), false)
		if _, err := b.Apply(context.Background(), shadowOf("b"), false); err == nil {
			t.Fatal("the second shadow was admitted past a limit of 1")
		}
		if len(inner.applied) != 1 {
			t.Errorf("the Applier was called %d times, want 1", len(inner.applied))
		}
	})
}
