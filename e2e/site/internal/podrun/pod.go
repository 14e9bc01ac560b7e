package podrun

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config is what a Pod needs from the node.
type Config struct {
	// Exe is the binary re-exec'd as the container helper (it calls RunHelperIfRequested).
	Exe string
	// Address is the node's address: every pod's IP and host IP.
	Address string
	// Dir is the pod's own state directory (logs, termination messages); Remove deletes it.
	Dir string
	// Prepare sets the pod's volumes up; until it succeeds no container starts (the pod
	// shows ContainerCreating), and it is retried. Its error is the message of the kubelet's
	// FailedMount Event (MountVolume.SetUp failed for volume "<name>" : <cause>).
	Prepare func() error
	// VolumePath is the host directory of a prepared volume.
	VolumePath func(volume string) string
	// HostsFile is the pod's /etc/hosts on the host, bound into every container.
	HostsFile   string
	Env         EnvSources
	Mountpoints *Mountpoints
	// InitialBackoff and MaxBackoff are the crash-loop back-off: the kubelet's are 10s and
	// 5m; tests shorten them.
	InitialBackoff, MaxBackoff time.Duration
	Logf                       func(format string, args ...any)
	// Changed is called (from any goroutine, without locks held) when the status changed.
	Changed func()
	// Record, when set, is given (from any goroutine, without locks held) each Event the
	// kubelet would record about the pod: failed probes (Unhealthy), crash-loop back-off
	// (BackOff), volumes that cannot be set up (FailedMount).
	Record func(Event)
}

// retryEvery is how often a pod that cannot start yet (missing Secret, …) tries again.
const retryEvery = 2 * time.Second

// Pod is one running pod.
type Pod struct {
	cfg       Config
	pod       *corev1.Pod
	name      string // namespace/name, for the log
	startTime metav1.Time

	mu          sync.Mutex
	containers  map[string]*container
	order       []*container // init containers, then containers
	initialized bool
	// finished is set once no container will run again; failed says how it ended.
	finished, failed bool

	stopping chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// Start begins running pod (its spec is not changed afterwards) and returns at once.
func Start(cfg Config, pod *corev1.Pod) (*Pod, error) {
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o750); err != nil {
		return nil, fmt.Errorf("pod state dir: %w", err)
	}
	p := &Pod{
		cfg: cfg, pod: pod.DeepCopy(), name: pod.Namespace + "/" + pod.Name,
		startTime:  metav1.Now(),
		containers: map[string]*container{},
		stopping:   make(chan struct{}), done: make(chan struct{}),
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		p.add(c, true, sidecar)
	}
	for i := range pod.Spec.Containers {
		p.add(&pod.Spec.Containers[i], false, false)
	}
	go p.run()
	return p, nil
}

func (p *Pod) add(spec *corev1.Container, init, sidecar bool) {
	c := &container{pod: p, spec: spec.DeepCopy(), init: init, sidecar: sidecar}
	// The kubelet's reasons before a first start: PodInitializing while init containers
	// have yet to run (for them and the containers after), ContainerCreating otherwise.
	reason := "ContainerCreating"
	if init || len(p.pod.Spec.InitContainers) > 0 {
		reason = "PodInitializing"
	}
	c.status = corev1.ContainerStatus{
		Name: spec.Name, Image: spec.Image, ImageID: "site://" + spec.Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}},
	}
	p.containers[spec.Name] = c
	p.order = append(p.order, c)
}

// run is the pod's whole life: volumes, init containers in order, then the containers until
// none will run again or the pod is stopped.
func (p *Pod) run() {
	defer close(p.done)
	var nextEvent time.Time
	eventEvery := retryEvery
	for lastErr := ""; ; {
		err := p.cfg.Prepare()
		if err == nil {
			break
		}
		if err.Error() != lastErr {
			lastErr = err.Error()
			p.cfg.Logf("pod %s: volumes not ready (retrying every %s): %v", p.name, retryEvery, err)
		}
		if now := time.Now(); !now.Before(nextEvent) {
			p.record(Event{Type: corev1.EventTypeWarning, Reason: reasonFailedMount, Message: err.Error()})
			nextEvent = now.Add(eventEvery)
			eventEvery = min(2*eventEvery, mountRetryMax)
		}
		if !p.sleep(retryEvery) {
			return
		}
	}
	p.cfg.Logf("pod %s: started", p.name)
	var sidecars sync.WaitGroup
	for _, c := range p.order {
		if !c.init {
			continue
		}
		if c.sidecar {
			sidecars.Add(1)
			go func() { defer sidecars.Done(); c.supervise() }()
			if !c.waitStarted() {
				sidecars.Wait()
				return
			}
			continue
		}
		if code := c.supervise(); code != 0 {
			p.finish(true)
			p.stopSidecars(&sidecars)
			return
		}
		if p.isStopping() {
			sidecars.Wait()
			return
		}
	}
	p.mu.Lock()
	p.initialized = true
	p.mu.Unlock()
	p.changed()
	var mains sync.WaitGroup
	var mu sync.Mutex
	failed := false
	for _, c := range p.order {
		if c.init {
			continue
		}
		mains.Add(1)
		go func() {
			defer mains.Done()
			if code := c.supervise(); code != 0 {
				mu.Lock()
				failed = true
				mu.Unlock()
			}
		}()
	}
	mains.Wait()
	if !p.isStopping() {
		p.finish(failed)
	}
	p.stopSidecars(&sidecars)
}

// stopSidecars ends the sidecars once the pod's work is over, as the kubelet does.
func (p *Pod) stopSidecars(sidecars *sync.WaitGroup) {
	p.stop()
	sidecars.Wait()
}

func (p *Pod) finish(failed bool) {
	p.mu.Lock()
	p.finished, p.failed = true, failed
	p.mu.Unlock()
	p.cfg.Logf("pod %s: finished (failed=%v)", p.name, failed)
	p.changed()
}

// Stop kills every container (SIGTERM to its process group, SIGKILL after grace) and waits
// until the pod's processes are gone.
func (p *Pod) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		close(p.stopping)
		for _, c := range p.order {
			go c.kill(grace)
		}
	})
	<-p.done
	for _, c := range p.order {
		c.waitExited()
	}
}

// stop marks the pod stopping and kills what still runs, at once (sidecars after the pod's
// work is done).
func (p *Pod) stop() {
	p.stopOnce.Do(func() {
		close(p.stopping)
		for _, c := range p.order {
			go c.kill(p.Grace())
		}
	})
}

// Remove deletes the pod's state directory and releases its mount targets; call after Stop.
func (p *Pod) Remove() error {
	p.cfg.Mountpoints.Release(string(p.pod.UID))
	return os.RemoveAll(p.cfg.Dir)
}

// Grace is the pod's termination grace period (the kubelet's default is 30s).
func (p *Pod) Grace() time.Duration {
	if s := p.pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}

func (p *Pod) isStopping() bool {
	select {
	case <-p.stopping:
		return true
	default:
		return false
	}
}

// sleep waits d unless the pod is stopped first; it reports whether to go on.
func (p *Pod) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.stopping:
		return false
	case <-t.C:
		return true
	}
}

func (p *Pod) changed() {
	if p.cfg.Changed != nil {
		p.cfg.Changed()
	}
}
