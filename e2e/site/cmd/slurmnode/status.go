package main

import (
	"fmt"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/slurm"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// exit is a container's exit code as the batch script recorded it, and when.
type exit struct {
	code int32
	at   time.Time
}

// jobView is everything the pod's status is made of: what Slurm says of the job (lost: it
// no longer knows it), the exit codes the script recorded, keyed by containerKey, and the
// address of the node the job runs on.
type jobView struct {
	id       string
	job      slurm.Job
	lost     bool
	exits    map[string]exit
	nodeAddr string
}

func containerKey(name string, init bool) string {
	if init {
		return "init/" + name
	}
	return name
}

// ended reports whether the job will not run any more.
func (v jobView) ended() bool {
	switch v.job.State {
	case "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT":
		return v.lost
	}
	return true
}

// running reports whether the batch script runs (its containers may).
func (v jobView) running() bool {
	return !v.lost && (v.job.State == "RUNNING" || v.job.State == "COMPLETING")
}

// podStatus is the pod's status for the job as interLink's virtual kubelet reports it: the
// phase follows the job (Pending while queued, Running while it runs, Succeeded or Failed by
// the containers' exit codes once it ended), each container's state follows its own exit
// code, and the pod's IP and host IP are the compute node's address.
func podStatus(pod *corev1.Pod, v jobView) corev1.PodStatus {
	st := corev1.PodStatus{HostIP: v.nodeAddr, PodIP: v.nodeAddr}
	if v.nodeAddr != "" {
		st.HostIPs = []corev1.HostIP{{IP: v.nodeAddr}}
		st.PodIPs = []corev1.PodIP{{IP: v.nodeAddr}}
	}
	start := metav1.NewTime(v.job.Start)
	if v.job.Start.IsZero() {
		start = pod.CreationTimestamp
	}
	st.StartTime = &start
	pending := &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "SlurmPending",
		Message: fmt.Sprintf("Slurm job %s is %s (%s)", v.id, v.job.State, v.job.Reason),
	}}
	initializing := &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	runningSince := &corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}

	// state is a container's state once the job has started: terminated by its exit code, or
	// by the job's end when it recorded none (cancelled, timed out, its init container failed).
	state := func(key string) (*corev1.ContainerState, bool) {
		if e, ok := v.exits[key]; ok {
			t := &corev1.ContainerStateTerminated{ExitCode: e.code, Reason: "Completed", StartedAt: start, FinishedAt: metav1.NewTime(e.at)}
			if e.code != 0 {
				t.Reason = "Error"
			}
			return &corev1.ContainerState{Terminated: t}, true
		}
		if !v.ended() {
			return nil, false
		}
		code := int32(v.job.ExitCode)
		if code == 0 {
			code = 1
		}
		reason, message := v.job.State, fmt.Sprintf("Slurm job %s ended (%s) before the container recorded an exit code", v.id, v.job.State)
		if v.lost {
			reason, message = "SlurmJobLost", fmt.Sprintf("Slurm no longer knows job %s, and the container recorded no exit code", v.id)
		}
		return &corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: message, StartedAt: start, FinishedAt: metav1.NewTime(v.job.End)}}, true
	}

	started := v.running() || v.ended()
	initDone := true
	for _, c := range pod.Spec.InitContainers {
		s := pending
		if started {
			if done, ok := state(containerKey(c.Name, true)); ok {
				s = done
			} else if initDone {
				s = runningSince
			} else {
				s = initializing
			}
		}
		if s.Terminated == nil || s.Terminated.ExitCode != 0 {
			initDone = false
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, containerStatus(c, v.id, s))
	}
	allReady, allSucceeded := true, true
	for _, c := range pod.Spec.Containers {
		s := pending
		switch {
		case !started:
		case !initDone && !v.ended():
			s = initializing
		default:
			if done, ok := state(containerKey(c.Name, false)); ok {
				s = done
			} else {
				s = runningSince
			}
		}
		allReady = allReady && s.Running != nil
		allSucceeded = allSucceeded && s.Terminated != nil && s.Terminated.ExitCode == 0
		cs := containerStatus(c, v.id, s)
		cs.Ready = s.Running != nil
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}

	switch {
	case v.ended() && allSucceeded && (v.job.State == "COMPLETED" || v.lost):
		st.Phase = corev1.PodSucceeded
	case v.ended():
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "SlurmJob"+v.job.State, fmt.Sprintf("Slurm job %s ended %s", v.id, v.job.State)
		if v.lost {
			st.Reason, st.Message = "SlurmJobLost", fmt.Sprintf("Slurm no longer knows job %s", v.id)
		}
	case v.running() && initDone:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	st.Conditions = []corev1.PodCondition{
		condition(corev1.PodScheduled, true),
		condition(corev1.PodInitialized, initDone && started),
		condition(corev1.ContainersReady, allReady && v.running()),
		condition(corev1.PodReady, allReady && v.running()),
	}
	return st
}

// refusedStatus is a pod the node could not turn into a job: it failed before Slurm saw it.
func refusedStatus(pod *corev1.Pod, reason, message string) corev1.PodStatus {
	start := pod.CreationTimestamp
	return corev1.PodStatus{
		Phase:     corev1.PodFailed,
		Reason:    reason,
		Message:   message,
		StartTime: &start,
		Conditions: []corev1.PodCondition{
			condition(corev1.PodScheduled, true),
			condition(corev1.PodInitialized, false),
			condition(corev1.ContainersReady, false),
			condition(corev1.PodReady, false),
		},
	}
}

// containerStatus names the container's job in its container ID: slurm://<job ID>/<name>.
func containerStatus(c corev1.Container, jobID string, s *corev1.ContainerState) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: *s}
	if s.Waiting == nil {
		cs.ContainerID = "slurm://" + jobID + "/" + c.Name
		started := true
		cs.Started = &started
	}
	return cs
}

func condition(t corev1.PodConditionType, ok bool) corev1.PodCondition {
	s := corev1.ConditionFalse
	if ok {
		s = corev1.ConditionTrue
	}
	return corev1.PodCondition{Type: t, Status: s}
}
