package webhook

import (
	"cmp"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/interlink-hq/shadowgate/internal/drift"
)

// rollPacer paces the rolls of shadows the policy in force renders differently (their
// inject.AnnotationRendered differs from the one rendered now): at most max rolls at a time, a
// roll holding its slot from its apply until its Deployment has replaced the shadow pod and
// the new one is available. A roll that never completes (an image that does not pull) keeps
// its slot, so a bad policy stops after max shadows rather than breaking every tunnel. Shadows
// waiting for a slot whose tunnel is not in use (not Ready: nothing to break) get the next free
// one, then the others, longest waiting first (the reconciler also wakes idle shadows first on
// a policy change, so they take the first slots too). It keeps each shadow's drift state for the
// shadowgate_shadows_drifted gauge. It is the leader's, in memory: a new leader finds the
// drifted shadows again as it reconciles every pod on start.
type rollPacer struct {
	max int
	// wake asks for another reconcile of a waiting pod, once a slot is free for it.
	wake    func(types.NamespacedName)
	metrics *Metrics

	mu      sync.Mutex
	rolling map[types.UID]roll
	waiting map[types.UID]waiter
	states  map[types.UID]drift.State
}

// roll is one shadow being rolled.
type roll struct {
	pod types.NamespacedName
	// hash is the inject.AnnotationRendered applied: the cache may still show the Deployment
	// from before the apply, and it is not applied twice.
	hash string
	// generation is the Deployment's before the apply: a later one says its spec changed,
	// which, in a shadow, is its pod template, so its pod is replaced.
	generation int64
	// restarting says the replacement of the shadow pod was seen (and said on the pod).
	restarting bool
	since      time.Time
	// reserved says the slot was given to a waiting shadow, woken to take it, that has not
	// been applied yet: no other shadow takes it meanwhile.
	reserved bool
}

type waiter struct {
	pod   types.NamespacedName
	inUse bool
	since time.Time
}

func newRollPacer(maxRolling int, metrics *Metrics, wake func(types.NamespacedName)) *rollPacer {
	return &rollPacer{max: maxRolling, metrics: metrics, wake: wake, rolling: map[types.UID]roll{},
		waiting: map[types.UID]waiter{}, states: map[types.UID]drift.State{}}
}

// turn is what take gives a drifted shadow.
type turn int

const (
	turnNow     turn = iota // apply it now: it holds a slot
	turnWait                // wait: no slot is free for it
	turnApplied             // it was applied with this hash already; the cache is behind
)

// take gives the drifted shadow of pod (uid), whose Deployment is at generation, its turn to
// be applied with hash. A shadow already rolling keeps its slot. One that must wait is woken
// when a slot frees for it.
func (p *rollPacer) take(uid types.UID, pod types.NamespacedName, hash string, generation int64, inUse bool, now time.Time) turn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.rolling[uid]; ok && !r.reserved {
		if r.hash == hash {
			return turnApplied
		}
		r.hash = hash
		p.rolling[uid] = r
		return turnNow
	}
	_, reserved := p.rolling[uid]
	if !reserved && (len(p.rolling) >= p.max || (inUse && p.idleWaiting(uid))) {
		w, ok := p.waiting[uid]
		if !ok {
			w.since = now
		}
		w.pod, w.inUse = pod, inUse
		p.waiting[uid] = w
		p.setState(uid, drift.OutOfDate)
		return turnWait
	}
	delete(p.waiting, uid)
	p.rolling[uid] = roll{pod: pod, hash: hash, generation: generation, since: now}
	p.setState(uid, drift.Rolling)
	return turnNow
}

// adopt counts the roll of pod (uid) that the pod says is in progress (drift.Rolling) though
// this pacer did not start it, as after a change of leader: its shadow pod is being replaced
// all the same, so it holds a slot until the new one is available. Rolls started before it is
// seen may pass max for that while.
func (p *rollPacer) adopt(uid types.UID, pod types.NamespacedName, hash string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.rolling[uid]; ok {
		return
	}
	// generation -1: whichever the Deployment is at, its replacement of the pod was seen.
	p.rolling[uid] = roll{pod: pod, hash: hash, generation: -1, restarting: true, since: now}
	p.setState(uid, drift.Rolling)
}

// abandon frees the slot of a shadow whose apply failed: it is out of date still, and its
// reconcile is retried with backoff.
func (p *rollPacer) abandon(uid types.UID) {
	p.mu.Lock()
	delete(p.rolling, uid)
	p.setState(uid, drift.OutOfDate)
	next := p.nextWaiting()
	p.mu.Unlock()
	for _, pod := range next {
		p.wake(pod)
	}
}

// idleWaiting says whether a shadow other than uid's, whose tunnel is not in use, waits.
func (p *rollPacer) idleWaiting(uid types.UID) bool {
	for other, w := range p.waiting {
		if other != uid && !w.inUse {
			return true
		}
	}
	return false
}

// rollStep is where the roll of a current shadow stands, as settle finds it.
type rollStep int

const (
	rollNone       rollStep = iota // no roll of this shadow in progress
	rollRestarting                 // its shadow pod is being replaced, seen now for the first time
	rollWaiting                    // its shadow pod is being replaced, as seen before
	rollRestarted                  // its new shadow pod is available: the roll is over
	rollInPlace                    // the apply changed no pod template: the roll is over
)

// settle is told the Deployment of a shadow whose hash is current, and says where its roll
// stands; a roll that is over frees its slot for the next waiting shadow.
func (p *rollPacer) settle(uid types.UID, d *appsv1.Deployment) (rollStep, roll) {
	p.mu.Lock()
	r, ok := p.rolling[uid]
	if !ok || r.reserved {
		delete(p.waiting, uid)
		p.setState(uid, drift.Current)
		var next []types.NamespacedName
		if ok {
			delete(p.rolling, uid) // woken for a slot it no longer needs
			next = p.nextWaiting()
		}
		p.mu.Unlock()
		for _, pod := range next {
			p.wake(pod)
		}
		return rollNone, roll{}
	}
	step := rollInPlace
	switch {
	case d.Generation == r.generation:
	case !rolledOut(d) && r.restarting:
		step = rollWaiting
	case !rolledOut(d):
		step = rollRestarting
		r.restarting = true
		p.rolling[uid] = r
	default:
		step = rollRestarted
	}
	if step == rollWaiting || step == rollRestarting {
		p.mu.Unlock()
		return step, r
	}
	delete(p.rolling, uid)
	p.setState(uid, drift.Current)
	next := p.nextWaiting()
	p.mu.Unlock()
	result := rolledInPlace
	if step == rollRestarted {
		result = rolledRestarted
	}
	p.metrics.shadowRolls.WithLabelValues(result).Inc()
	for _, pod := range next {
		p.wake(pod)
	}
	return step, r
}

// nextWaiting are the waiting shadows the free slots go to, in their order, each with its slot
// reserved until its reconcile takes it. Called with mu held.
func (p *rollPacer) nextWaiting() []types.NamespacedName {
	free := p.max - len(p.rolling)
	if free <= 0 || len(p.waiting) == 0 {
		return nil
	}
	type entry struct {
		uid types.UID
		waiter
	}
	var all []entry
	for uid, w := range p.waiting {
		all = append(all, entry{uid, w})
	}
	slices.SortFunc(all, func(a, b entry) int {
		if a.inUse != b.inUse {
			if a.inUse {
				return 1
			}
			return -1
		}
		return cmp.Or(a.since.Compare(b.since), cmp.Compare(a.pod.String(), b.pod.String()))
	})
	var next []types.NamespacedName
	for _, e := range all[:min(free, len(all))] {
		delete(p.waiting, e.uid)
		p.rolling[e.uid] = roll{pod: e.pod, reserved: true}
		next = append(next, e.pod)
	}
	return next
}

// refused records that the policy in force would refuse the pod uid: its shadow is left as it
// is, does not roll, and gives up the slot it held or was given.
func (p *rollPacer) refused(uid types.UID) { p.drop(uid, drift.Refused) }

// gone drops the pod uid, deleted or finished, and frees its slot if it held one.
func (p *rollPacer) gone(uid types.UID) { p.drop(uid, drift.Current) }

// drop stops pacing uid, now in state, and gives its slot, if it held one, to the next waiting.
func (p *rollPacer) drop(uid types.UID, state drift.State) {
	p.mu.Lock()
	_, held := p.rolling[uid]
	delete(p.rolling, uid)
	delete(p.waiting, uid)
	p.setState(uid, state)
	var next []types.NamespacedName
	if held {
		next = p.nextWaiting()
	}
	p.mu.Unlock()
	for _, pod := range next {
		p.wake(pod)
	}
}

// setState records uid's state for the gauge; Current is not kept. Called with mu held.
func (p *rollPacer) setState(uid types.UID, s drift.State) {
	old, had := p.states[uid]
	if had && old == s {
		return
	}
	if had {
		p.metrics.shadowsDrifted.WithLabelValues(string(old)).Dec()
		delete(p.states, uid)
	}
	if s != drift.Current {
		p.states[uid] = s
		p.metrics.shadowsDrifted.WithLabelValues(string(s)).Inc()
	}
}

// rolledOut says whether the Deployment runs its current pod template, available: observed,
// updated and no pod of an older template left.
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
}
