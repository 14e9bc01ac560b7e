package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/slurm"
	corev1 "k8s.io/api/core/v1"
)

func TestPodStatusFollowsTheJob(t *testing.T) {
	start := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "fetch"}},
		Containers:     []corev1.Container{{Name: "web"}, {Name: "side"}},
	}}
	type want struct {
		phase     corev1.PodPhase
		hostIP    string
		init, web string // waiting reason, "running", or "exit N reason"
		side      string
		ready     bool
	}
	cases := map[string]struct {
		view jobView
		want want
	}{
		"a queued job leaves every container waiting with SlurmPending": {
			jobView{id: "7", job: slurm.Job{State: "PENDING", Reason: "Resources"}},
			want{phase: corev1.PodPending, init: "SlurmPending", web: "SlurmPending", side: "SlurmPending"},
		},
		"a running job runs its init container first; the pod stays Pending": {
			jobView{id: "7", job: slurm.Job{State: "RUNNING", Start: start, BatchHost: "n1"}, nodeAddr: "10.0.0.5"},
			want{phase: corev1.PodPending, hostIP: "10.0.0.5", init: "running", web: "PodInitializing", side: "PodInitializing"},
		},
		"once the init container succeeded the containers run and the pod is Running and ready": {
			jobView{id: "7", job: slurm.Job{State: "RUNNING", Start: start}, nodeAddr: "10.0.0.5", exits: map[string]exit{"init/fetch": {code: 0}}},
			want{phase: corev1.PodRunning, hostIP: "10.0.0.5", init: "exit 0 Completed", web: "running", side: "running", ready: true},
		},
		"a completed job with every exit code 0 is Succeeded": {
			jobView{id: "7", job: slurm.Job{State: "COMPLETED"}, nodeAddr: "10.0.0.5", exits: map[string]exit{"init/fetch": {}, "web": {}, "side": {}}},
			want{phase: corev1.PodSucceeded, hostIP: "10.0.0.5", init: "exit 0 Completed", web: "exit 0 Completed", side: "exit 0 Completed"},
		},
		"a container's failure fails the pod, each container keeping its own code": {
			jobView{id: "7", job: slurm.Job{State: "FAILED", ExitCode: 3}, exits: map[string]exit{"init/fetch": {}, "web": {code: 3}, "side": {}}},
			want{phase: corev1.PodFailed, init: "exit 0 Completed", web: "exit 3 Error", side: "exit 0 Completed"},
		},
		"a cancelled job ends the containers that recorded nothing with the job's state": {
			jobView{id: "7", job: slurm.Job{State: "CANCELLED"}, exits: map[string]exit{"init/fetch": {}}},
			want{phase: corev1.PodFailed, init: "exit 0 Completed", web: "exit 1 CANCELLED", side: "exit 1 CANCELLED"},
		},
		"a failed init container fails the pod; the containers never ran": {
			jobView{id: "7", job: slurm.Job{State: "FAILED", ExitCode: 2}, exits: map[string]exit{"init/fetch": {code: 2}}},
			want{phase: corev1.PodFailed, init: "exit 2 Error", web: "exit 2 FAILED", side: "exit 2 FAILED"},
		},
		"a job Slurm forgot, without exit codes, is lost": {
			jobView{id: "7", lost: true, job: slurm.Job{State: "UNKNOWN"}},
			want{phase: corev1.PodFailed, init: "exit 1 SlurmJobLost", web: "exit 1 SlurmJobLost", side: "exit 1 SlurmJobLost"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			st := podStatus(pod, c.view)
			got := want{phase: st.Phase, hostIP: st.HostIP, init: describeState(st.InitContainerStatuses[0].State),
				web: describeState(st.ContainerStatuses[0].State), side: describeState(st.ContainerStatuses[1].State)}
			for _, cond := range st.Conditions {
				if cond.Type == corev1.PodReady {
					got.ready = cond.Status == corev1.ConditionTrue
				}
			}
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			if st.PodIP != st.HostIP {
				t.Errorf("pod IP %q differs from host IP %q: the job shares its node's network", st.PodIP, st.HostIP)
			}
		})
	}
}

func describeState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return s.Waiting.Reason
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return "exit " + strconv.Itoa(int(s.Terminated.ExitCode)) + " " + s.Terminated.Reason
	}
	return "none"
}

// TestAJobsEndReachesThePodLate: the pod learns of its job's end -job-end-delay after the
// node first saw it, as the plugin's status cache tells the virtual kubelet; without a delay,
// at once.
func TestAJobsEndReachesThePodLate(t *testing.T) {
	seen := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	pj := &podJob{}
	for _, step := range []struct {
		after time.Duration
		want  bool
	}{{0, false}, {29 * time.Second, false}, {30 * time.Second, true}, {time.Minute, true}} {
		if got := pj.reportEnd(seen.Add(step.after), 30*time.Second); got != step.want {
			t.Errorf("%s after the end was seen: reported %t, want %t", step.after, got, step.want)
		}
	}
	if !(&podJob{}).reportEnd(seen, 0) {
		t.Error("without a delay the end is not reported at once")
	}
}
