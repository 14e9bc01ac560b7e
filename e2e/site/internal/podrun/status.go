package podrun

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Status is the pod's status as the kubelet would report it now.
func (p *Pod) Status() *corev1.PodStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := &corev1.PodStatus{
		HostIP: p.cfg.Address, HostIPs: []corev1.HostIP{{IP: p.cfg.Address}},
		PodIP: p.cfg.Address, PodIPs: []corev1.PodIP{{IP: p.cfg.Address}},
		StartTime: &p.startTime,
		QOSClass:  p.pod.Status.QOSClass,
	}
	allReady, anyRunning, anyStarted := true, false, false
	for _, c := range p.order {
		cs := *c.status.DeepCopy()
		if c.init {
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
			if c.sidecar && !cs.Ready {
				allReady = false
			}
			continue
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if !cs.Ready {
			allReady = false
		}
		if cs.State.Running != nil {
			anyRunning = true
		}
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.RestartCount > 0 {
			anyStarted = true
		}
	}
	switch {
	case p.finished && p.failed:
		st.Phase = corev1.PodFailed
	case p.finished:
		st.Phase = corev1.PodSucceeded
	case p.initialized && (anyRunning || anyStarted):
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	ready := allReady && anyRunning && !p.finished
	now := metav1.Now()
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: now}
		if ok {
			c.Status = corev1.ConditionTrue
		} else {
			c.Reason = reason
		}
		return c
	}
	notReady := "ContainersNotReady"
	if p.finished {
		notReady = "PodCompleted"
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodScheduled, true, ""),
		cond(corev1.PodInitialized, p.initialized, "ContainersNotInitialized"),
		cond(corev1.ContainersReady, ready, notReady),
		cond(corev1.PodReady, ready, notReady),
	}
	return st
}

// Logs streams a container's log (the previous instance's with opts.Previous).
func (p *Pod) Logs(ctx context.Context, container string, opts api.ContainerLogOpts, w io.Writer) error {
	c, ok := p.containers[container]
	if !ok {
		return fmt.Errorf("pod %s has no container %q", p.name, container)
	}
	p.mu.Lock()
	instance := c.instance
	p.mu.Unlock()
	if opts.Previous {
		instance--
	}
	if instance < 1 {
		if opts.Previous {
			return fmt.Errorf("previous terminated container %q in pod %s not found: %w", container, p.name, os.ErrNotExist)
		}
		p.mu.Lock()
		waiting := "not started"
		if w := c.status.State.Waiting; w != nil {
			waiting = w.Reason
		}
		p.mu.Unlock()
		return fmt.Errorf("container %q in pod %s is waiting to start: %s: %w", container, p.name, waiting, os.ErrNotExist)
	}
	finished := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return c.instance != instance || c.proc == nil
	}
	return readLog(ctx, c.logPath(instance), opts, finished, w)
}

// Exec runs argv in a running container (kubectl exec) and returns its exit code.
func (p *Pod) Exec(ctx context.Context, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c, ok := p.containers[container]
	if !ok {
		return -1, fmt.Errorf("pod %s has no container %q", p.name, container)
	}
	return c.execInContainer(ctx, argv, stdin, stdout, stderr)
}
