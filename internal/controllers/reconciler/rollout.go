package reconciler

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/metrics"
)

// rollPacer paces the rolls of shadows the policy in force renders differently (their
// inject.AnnotationRendered differs from the one rendered now). A roll holds a slot from its
// apply until its Deployment has replaced the shadow pod (the new one's containers started,
// ready or not: a queued job's shadow is never ready) or rollTimeout has passed; at most max
// slots are held at a time. The first rolls under a policy prove it: until one has replaced its
// shadow pod, every roll takes a slot, and once max rolls in a row have timed out (an image
// that does not pull) no roll starts until a new policy is loaded, so a bad policy stops after
// max shadows rather than breaking every tunnel. Once proven, shadows whose tunnel is not in use
// (not Ready: nothing to break) roll without a slot; the others wait for one, longest waiting
// first. It keeps each shadow's drift state for the shadowgate_shadows_drifted gauge. It is the
// leader's, in memory: a new leader finds the rolls in progress on the shadow Deployments
// themselves (rollingOut), never on the pods, whose annotations their owners can write.
type rollPacer struct {
	max int
	// wake asks for another reconcile of a waiting pod, once a slot is free for it.
	wake    func(types.NamespacedName)
	metrics *metrics.Metrics

	mu      sync.Mutex
	rolling map[types.UID]roll
	waiting map[types.UID]waiter
	states  map[types.UID]drift.State
	// proven says a roll under the policy in force has replaced its shadow pod; stalls counts
	// the rolls that timed out since the last that did, or since the policy was loaded.
	proven bool
	stalls int
}

// rollTimeout is how long a roll holds its slot at most: a shadow pod not replaced by then (an
// image that does not pull, a node that cannot take it) gives up its slot as stalled.
const rollTimeout = 10 * time.Minute

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
	// free says the roll holds no slot: its tunnel was not in use, under a proven policy.
	free bool
	// inUse says the tunnel carried traffic when the roll started: it is over once the new
	// shadow pod is available, not merely running.
	inUse bool
}

type waiter struct {
	pod   types.NamespacedName
	inUse bool
	since time.Time
}

func newRollPacer(maxRolling int, metrics *metrics.Metrics, wake func(types.NamespacedName)) *rollPacer {
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
	free := !inUse && p.proven
	if !reserved && (p.stopped() || (!free && p.held() >= p.max)) {
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
	p.rolling[uid] = roll{pod: pod, hash: hash, generation: generation, since: now, free: free && !reserved, inUse: inUse}
	p.setState(uid, drift.Rolling)
	return turnNow
}

// held is how many slots are held, reserved ones included. Called with mu held.
func (p *rollPacer) held() int {
	n := 0
	for _, r := range p.rolling {
		if !r.free {
			n++
		}
	}
	return n
}

// stopped says max rolls in a row have timed out under the policy in force. Called with mu
// held.
func (p *rollPacer) stopped() bool { return p.stalls >= p.max }

// adopt counts the roll of pod (uid) that its Deployment shows in progress (rollingOut) though
// this pacer did not start it, as after a change of leader: it holds a slot until its shadow
// pod is replaced or rollTimeout has passed. Rolls another leader started may hold more than
// max slots for that while; no roll starts until fewer are held.
func (p *rollPacer) adopt(uid types.UID, pod types.NamespacedName, hash string, inUse bool, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.rolling[uid]; ok {
		return
	}
	delete(p.waiting, uid)
	// generation -1: whichever the Deployment is at, its replacement of the pod was seen.
	p.rolling[uid] = roll{pod: pod, hash: hash, generation: -1, restarting: true, since: now, inUse: inUse}
	p.setState(uid, drift.Rolling)
}

// isRolling says whether the pacer counts a roll of uid, or a slot reserved for it.
func (p *rollPacer) isRolling(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.rolling[uid]
	return ok
}

// newPolicy starts over under a newly loaded policy: it is not proven yet, and no roll of it
// has timed out; shadows that waited behind the last policy's stalled rolls are woken.
func (p *rollPacer) newPolicy() {
	p.mu.Lock()
	p.proven, p.stalls = false, 0
	next := p.nextWaiting()
	p.mu.Unlock()
	for _, pod := range next {
		p.wake(pod)
	}
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

// rollStep is where the roll of a current shadow stands, as settle finds it.
type rollStep int

const (
	rollNone       rollStep = iota // no roll of this shadow in progress
	rollRestarting                 // its shadow pod is being replaced, seen now for the first time
	rollWaiting                    // its shadow pod is being replaced, as seen before
	rollRestarted                  // its shadow pod is replaced: the roll is over
	rollInPlace                    // the apply changed no pod template: the roll is over
	rollStalled                    // its shadow pod was not replaced within rollTimeout: the slot is given up
)

// settle is told the Deployment of a shadow whose hash is current, and whether each of its pods
// has started (shadows.Started), and says where its roll stands at now; a roll that is over
// frees its slot for the next waiting shadow. A roll of a tunnel that carried traffic is over
// once its new shadow pod is available, one of a tunnel that did not (a queued job's shadow,
// never ready) once its new pod has started.
func (p *rollPacer) settle(uid types.UID, d *appsv1.Deployment, started bool, now time.Time) (rollStep, roll) {
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
	case replaced(d, started && !r.inUse):
		step = rollRestarted
	case now.Sub(r.since) >= rollTimeout:
		step = rollStalled
	case r.restarting:
		step = rollWaiting
	default:
		step = rollRestarting
		r.restarting = true
		p.rolling[uid] = r
	}
	if step == rollWaiting || step == rollRestarting {
		p.mu.Unlock()
		return step, r
	}
	delete(p.rolling, uid)
	p.setState(uid, drift.Current)
	result := metrics.RolledInPlace
	switch step {
	case rollRestarted:
		result = metrics.RolledRestarted
		p.proven, p.stalls = true, 0
	case rollStalled:
		result = metrics.RolledStalled
		p.stalls++
	}
	next := p.nextWaiting()
	p.mu.Unlock()
	p.metrics.ShadowRolls.WithLabelValues(result).Inc()
	for _, pod := range next {
		p.wake(pod)
	}
	return step, r
}

// nextWaiting are the waiting shadows to wake, each to take its turn: none while max rolls in
// a row have stalled; under a proven policy every one whose tunnel is not in use (it needs no
// slot); then as many of the others as slots are free, longest waiting first, each with its
// slot reserved until its reconcile takes it. Called with mu held.
func (p *rollPacer) nextWaiting() []types.NamespacedName {
	if p.stopped() || len(p.waiting) == 0 {
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
	free := p.max - p.held()
	var next []types.NamespacedName
	for _, e := range all {
		switch {
		case !e.inUse && p.proven:
		case free > 0:
			free--
			p.rolling[e.uid] = roll{pod: e.pod, reserved: true}
		default:
			continue
		}
		delete(p.waiting, e.uid)
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
		p.metrics.ShadowsDrifted.WithLabelValues(string(old)).Dec()
		delete(p.states, uid)
	}
	if s != drift.Current {
		p.states[uid] = s
		p.metrics.ShadowsDrifted.WithLabelValues(string(s)).Inc()
	}
}

// rollingOut says whether the Deployment is replacing its pods: its spec not observed yet,
// fewer updated pods than it wants, or more pods. A shadow that is only not ready (a queued
// job, a login node down) is not rolling out.
func rollingOut(d *appsv1.Deployment) bool {
	s := d.Status
	return s.ObservedGeneration < d.Generation || s.UpdatedReplicas < replicas(d) || s.Replicas > replicas(d)
}

// replaced says whether the Deployment runs its current pod template alone, its pods available
// or, as a queued job's shadow never is, started.
func replaced(d *appsv1.Deployment, started bool) bool {
	want := replicas(d)
	return !rollingOut(d) && d.Status.Replicas == want && (d.Status.AvailableReplicas == want || started)
}

// revision is the Deployment controller's count of the Deployment's pod templates, 0 before it
// has seen one.
func revision(d *appsv1.Deployment) int {
	n, err := strconv.Atoi(d.Annotations["deployment.kubernetes.io/revision"])
	if err != nil {
		return 0
	}
	return n
}

// replicas is how many pods the Deployment wants.
func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}
