package reconciler

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/metrics"
)

// testPacer is a pacer of max slots that records whom it wakes.
func testPacer(t *testing.T, maxRolling int) (*rollPacer, *[]string) {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	woken := &[]string{}
	return newRollPacer(maxRolling, m, func(pod types.NamespacedName) { *woken = append(*woken, pod.Name) }), woken
}

func podKey(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "user", Name: name}
}

// deploymentAt is a one-replica Deployment at generation: still replacing its pod, or not.
func deploymentAt(generation int64, rolledOut bool) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: generation}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: generation, Replicas: 2, UpdatedReplicas: 1}
	if rolledOut {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: generation, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
	}
	return d
}

// replacedUnready is a one-replica Deployment at generation whose one pod runs the new template
// and is not available: a queued job's shadow.
func replacedUnready(generation int64) *appsv1.Deployment {
	d := deploymentAt(generation, true)
	d.Status.AvailableReplicas = 0
	return d
}

func drifted(p *rollPacer, s drift.State) float64 {
	return testutil.ToFloat64(p.metrics.ShadowsDrifted.WithLabelValues(string(s)))
}

func rolls(p *rollPacer, result string) float64 {
	return testutil.ToFloat64(p.metrics.ShadowRolls.WithLabelValues(result))
}

func TestAtMostMaxShadowsRollAtATimeAndIdleTunnelsGoFirst(t *testing.T) {
	p, woken := testPacer(t, 2)
	now := time.Now()
	// Before a roll has proven the policy, every roll takes a slot: a and b take the two; c's
	// tunnel is in use, d's is not, e's is in use: all wait.
	for i, tc := range []struct {
		name  string
		inUse bool
		want  turn
	}{{"a", true, turnNow}, {"b", false, turnNow}, {"c", true, turnWait}, {"d", false, turnWait}, {"e", true, turnWait}} {
		if got := p.take(types.UID(tc.name), podKey(tc.name), "new", 1, tc.inUse, now.Add(time.Duration(i)*time.Second)); got != tc.want {
			t.Fatalf("%s: turn %d, want %d", tc.name, got, tc.want)
		}
	}
	if drifted(p, drift.Rolling) != 2 || drifted(p, drift.OutOfDate) != 3 {
		t.Errorf("gauge: %v rolling, %v out of date; want 2 and 3", drifted(p, drift.Rolling), drifted(p, drift.OutOfDate))
	}
	// a's shadow pod is being replaced, then available: the policy is proven. d, idle, rolls
	// without a slot; a's slot goes to c, which has waited longer than e.
	if step, _ := p.settle("a", deploymentAt(2, false), false, now); step != rollRestarting {
		t.Fatalf("a: step %d, want rollRestarting", step)
	}
	if step, _ := p.settle("a", deploymentAt(2, false), false, now); step != rollWaiting {
		t.Fatalf("a again: step %d, want rollWaiting (said once)", step)
	}
	if len(*woken) != 0 {
		t.Fatalf("woken %v while both slots are held", *woken)
	}
	if step, _ := p.settle("a", deploymentAt(2, true), false, now); step != rollRestarted {
		t.Fatalf("a available: step %d, want rollRestarted", step)
	}
	if !slices.Equal(*woken, []string{"d", "c"}) {
		t.Fatalf("woken %v, want [d c]", *woken)
	}
	// e, in use, may not take c's reserved slot; woken, c and d take their turns.
	if got := p.take("e", podKey("e"), "new", 1, true, now); got != turnWait {
		t.Errorf("e took the slot reserved for c")
	}
	for _, name := range []string{"c", "d"} {
		if got := p.take(types.UID(name), podKey(name), "new", 1, name == "c", now); got != turnNow {
			t.Errorf("%s, woken: turn %d", name, got)
		}
	}
	// A shadow idle under the proven policy rolls at once, with both slots held.
	if got := p.take("f", podKey("f"), "new", 1, false, now); got != turnNow {
		t.Errorf("f, idle under a proven policy: turn %d, want turnNow without a slot", got)
	}
	// b's apply changed no pod template: over at once, its slot to e.
	*woken = nil
	if step, _ := p.settle("b", deploymentAt(1, false), false, now); step != rollInPlace {
		t.Fatalf("b: step %d, want rollInPlace", step)
	}
	if !slices.Equal(*woken, []string{"e"}) {
		t.Fatalf("woken %v, want [e]", *woken)
	}
	if rolls(p, metrics.RolledRestarted) != 1 || rolls(p, metrics.RolledInPlace) != 1 {
		t.Errorf("%v rolls restarted and %v in place, want 1 and 1", rolls(p, metrics.RolledRestarted), rolls(p, metrics.RolledInPlace))
	}
}

// A roll of a tunnel that carried no traffic is over once its Deployment runs the new template
// alone, its pod started: a queued job's shadow is never ready, and holds no slot for its
// queue. One that carried traffic is over once it is available again.
func TestAQueuedJobsShadowFreesItsSlotOnceReplaced(t *testing.T) {
	p, woken := testPacer(t, 1)
	now := time.Now()
	p.take("a", podKey("a"), "new", 1, false, now)
	p.take("b", podKey("b"), "new", 1, true, now)
	if step, _ := p.settle("a", replacedUnready(2), false, now); step != rollRestarting {
		t.Fatalf("a, its containers not started: step %d, want rollRestarting", step)
	}
	if step, _ := p.settle("a", replacedUnready(2), true, now); step != rollRestarted {
		t.Fatalf("a, replaced and started, not ready: step %d, want rollRestarted", step)
	}
	if !slices.Equal(*woken, []string{"b"}) {
		t.Errorf("woken %v, want [b]", *woken)
	}
	// b's tunnel carried traffic: started is not enough, it must carry it again.
	p.take("b", podKey("b"), "new", 1, true, now)
	if step, _ := p.settle("b", replacedUnready(2), true, now); step != rollRestarting {
		t.Errorf("b, in use, started and not ready: step %d, want rollRestarting", step)
	}
	if step, _ := p.settle("b", deploymentAt(2, true), true, now); step != rollRestarted {
		t.Errorf("b available: step %d, want rollRestarted", step)
	}
}

// A roll whose shadow pod is not replaced within rollTimeout gives up its slot; once max rolls
// in a row have, no roll starts, idle or not, until a new policy is loaded. A roll that
// replaces its pod in between starts the count again.
func TestStalledRollsGiveUpTheirSlotsAndMaxInARowStopTheRest(t *testing.T) {
	p, woken := testPacer(t, 2)
	now := time.Now()
	later := now.Add(rollTimeout)
	p.take("a", podKey("a"), "new", 1, true, now)
	p.take("b", podKey("b"), "new", 1, true, now)
	p.take("c", podKey("c"), "new", 1, true, now)
	if step, _ := p.settle("a", deploymentAt(2, false), false, later.Add(-time.Second)); step != rollRestarting {
		t.Fatalf("a before the timeout: step %d", step)
	}
	if step, _ := p.settle("a", deploymentAt(2, false), false, later); step != rollStalled {
		t.Fatalf("a at the timeout: step %d, want rollStalled", step)
	}
	if !slices.Equal(*woken, []string{"c"}) || rolls(p, metrics.RolledStalled) != 1 {
		t.Fatalf("woken %v after a stall (%v stalled), want [c]", *woken, rolls(p, metrics.RolledStalled))
	}
	p.take("c", podKey("c"), "new", 1, true, later)
	p.settle("b", deploymentAt(2, false), false, later.Add(-time.Second))
	p.settle("c", deploymentAt(2, false), false, later)
	if step, _ := p.settle("b", deploymentAt(2, false), false, later.Add(time.Second)); step != rollStalled {
		t.Fatalf("b at the timeout: step %d, want rollStalled", step)
	}
	// Two stalls in a row, at max 2: nothing starts, not even an idle shadow.
	*woken = nil
	for _, name := range []string{"d", "e"} {
		if got := p.take(types.UID(name), podKey(name), "new", 1, name == "d", later); got != turnWait {
			t.Errorf("%s started after max stalls in a row: turn %d", name, got)
		}
	}
	if len(*woken) != 0 {
		t.Errorf("woken %v after max stalls", *woken)
	}
	p.newPolicy()
	if !slices.Equal(*woken, []string{"e", "d"}) && !slices.Equal(*woken, []string{"e"}) {
		t.Errorf("woken %v under a new policy, want e (idle) first", *woken)
	}
}

func TestAShadowAppliedIsNotAppliedAgainWhileTheCacheIsBehind(t *testing.T) {
	p, _ := testPacer(t, 1)
	if got := p.take("a", podKey("a"), "h2", 1, false, time.Now()); got != turnNow {
		t.Fatalf("first take: %d", got)
	}
	if got := p.take("a", podKey("a"), "h2", 1, false, time.Now()); got != turnApplied {
		t.Errorf("the same hash again: turn %d, want turnApplied", got)
	}
	if got := p.take("a", podKey("a"), "h3", 1, false, time.Now()); got != turnNow {
		t.Errorf("a policy changed again during the roll: turn %d, want turnNow in the slot it holds", got)
	}
}

func TestAGoneOrFailedShadowFreesItsSlot(t *testing.T) {
	for sentence, free := range map[string]func(p *rollPacer){
		"the pod is gone":     func(p *rollPacer) { p.gone("a") },
		"the apply failed":    func(p *rollPacer) { p.abandon("a") },
		"the pod was refused": nil,
	} {
		t.Run(sentence, func(t *testing.T) {
			p, woken := testPacer(t, 1)
			p.take("a", podKey("a"), "new", 1, false, time.Now())
			p.take("b", podKey("b"), "new", 1, false, time.Now())
			if free == nil {
				// Refused only while waiting: a refused shadow never held a slot.
				p.refused("b")
				if drifted(p, drift.Refused) != 1 || drifted(p, drift.OutOfDate) != 0 {
					t.Errorf("gauge: refused %v, out of date %v", drifted(p, drift.Refused), drifted(p, drift.OutOfDate))
				}
				p.gone("a")
				if len(*woken) != 0 {
					t.Errorf("woken %v: a refused shadow does not roll", *woken)
				}
				return
			}
			free(p)
			if !slices.Equal(*woken, []string{"b"}) {
				t.Errorf("woken %v, want [b]", *woken)
			}
		})
	}
}

// A new leader finds a roll its Deployment shows in progress: it holds a slot until the new
// shadow pod is available, and is then over without a second Event.
func TestARollStartedByAnotherLeaderHoldsItsSlot(t *testing.T) {
	p, woken := testPacer(t, 1)
	p.adopt("a", podKey("a"), "new", true, time.Now())
	if got := p.take("b", podKey("b"), "new", 1, false, time.Now()); got != turnWait {
		t.Errorf("b took the slot of a's roll: turn %d", got)
	}
	if step, _ := p.settle("a", deploymentAt(4, false), false, time.Now()); step != rollWaiting {
		t.Errorf("a not available yet: step %d, want rollWaiting (its Event was the other leader's)", step)
	}
	if step, _ := p.settle("a", deploymentAt(4, true), false, time.Now()); step != rollRestarted {
		t.Errorf("a available: step %d, want rollRestarted", step)
	}
	if !slices.Equal(*woken, []string{"b"}) {
		t.Errorf("woken %v, want [b]", *woken)
	}
}

// A shadow refused in the middle of its roll, or once woken for a slot, gives the slot up.
func TestARefusedShadowGivesUpItsSlot(t *testing.T) {
	for sentence, setUp := range map[string]func(p *rollPacer){
		"refused while rolling": func(p *rollPacer) {
			p.take("a", podKey("a"), "new", 1, false, time.Now())
		},
		"refused once woken for a freed slot": func(p *rollPacer) {
			p.take("x", podKey("x"), "new", 1, false, time.Now())
			p.take("a", podKey("a"), "new", 1, false, time.Now())
			p.gone("x") // a is woken, its slot reserved
		},
	} {
		t.Run(sentence, func(t *testing.T) {
			p, woken := testPacer(t, 1)
			setUp(p)
			p.take("b", podKey("b"), "new", 1, false, time.Now())
			*woken = nil
			p.refused("a")
			if !slices.Equal(*woken, []string{"b"}) {
				t.Errorf("woken %v, want [b]", *woken)
			}
			if drifted(p, drift.Refused) != 1 {
				t.Errorf("gauge: %v refused, want 1", drifted(p, drift.Refused))
			}
		})
	}
}
