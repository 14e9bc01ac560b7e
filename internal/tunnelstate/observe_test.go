package tunnelstate

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// shadowPod is a shadow pod with wait-for-node and ssh-forward, in the statuses given.
func shadowPod(wait corev1.ContainerStatus, forward *corev1.ContainerStatus) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nb-user-abc", Namespace: "user-shadow"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "wait-for-node"}},
			Containers:     []corev1.Container{{Name: "ssh-forward"}},
		},
	}
	wait.Name = "wait-for-node"
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{wait}
	if forward != nil {
		forward.Name = "ssh-forward"
		p.Status.ContainerStatuses = []corev1.ContainerStatus{*forward}
	}
	return p
}

func running(startedAgo time.Duration) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-startedAgo))}}
}

func exited(code int32, message string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: message}}
}

func waiting(reason string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

func probeEvent(container, message string, ago time.Duration) corev1.Event {
	return corev1.Event{
		Reason:         "Unhealthy",
		Message:        message,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", FieldPath: "spec.containers{" + container + "}"},
		LastTimestamp:  metav1.NewTime(now.Add(-ago)),
	}
}

var nodeFound = corev1.ContainerStatus{State: exited(0, "NodeFound: 10.213.0.3")}

// slurmShadowPod is a shadow pod under NodeDiscovery slurm: the wait-reason sidecar running
// since sidecarAgo, then wait-for-node and ssh-forward in the statuses given.
func slurmShadowPod(sidecarAgo time.Duration, wait corev1.ContainerStatus, forward *corev1.ContainerStatus) *corev1.Pod {
	p := shadowPod(wait, forward)
	p.Spec.InitContainers = append([]corev1.Container{{Name: "wait-reason", RestartPolicy: new(corev1.ContainerRestartPolicyAlways)}}, p.Spec.InitContainers...)
	p.Status.InitContainerStatuses = append([]corev1.ContainerStatus{{Name: "wait-reason", State: running(sidecarAgo), Ready: true, Started: new(true)}},
		p.Status.InitContainerStatuses...)
	return p
}

// sidecarProbeEvent is the kubelet's Event for a failed probe of the wait-reason sidecar.
func sidecarProbeEvent(line string, ago time.Duration) corev1.Event {
	e := probeEvent("", "Readiness probe failed: "+line, ago)
	e.InvolvedObject.FieldPath = "spec.initContainers{wait-reason}"
	return e
}

const queuedLine = "WaitingForNode: job 12 is PENDING in Slurm (reason ReqNodeNotAvail, UnavailableNodes:n[1-3], expected start 2026-12-06T07:00:00Z): waiting for it to run"

func TestObserve(t *testing.T) {
	for name, tc := range map[string]struct {
		obs       Observation
		state     State
		reason    Reason
		message   string // a part of the message
		container string
		node      string
		// waitReason and expectedStart are what Slurm says of the queued job, "" for none.
		waitReason, expectedStart string
	}{
		"A pod whose shadow pod is not created yet is Starting.": {
			obs: Observation{}, state: Starting,
		},
		"A shadow waiting for the job's node is WaitingForNode.": {
			obs:   Observation{Pod: shadowPod(corev1.ContainerStatus{State: running(time.Minute)}, &corev1.ContainerStatus{State: waiting("PodInitializing")})},
			state: WaitingForNode, reason: ReasonWaitingForNode, container: "wait-for-node",
		},
		"A queued job's Slurm reason and expected start come from the sidecar's newest probe failure.": {
			obs: Observation{
				Pod: slurmShadowPod(10*time.Minute, corev1.ContainerStatus{State: running(9 * time.Minute)}, &corev1.ContainerStatus{State: waiting("PodInitializing")}),
				Events: []corev1.Event{
					sidecarProbeEvent("WaitingForNode: job 12 is PENDING in Slurm (reason Priority, expected start N/A): waiting for it to run", 8*time.Minute),
					sidecarProbeEvent(queuedLine, time.Minute),
				},
			},
			state: WaitingForNode, reason: ReasonWaitingForNode, container: "wait-for-node", message: "reason ReqNodeNotAvail, UnavailableNodes:n[1-3], expected start 2026-12-06T07:00:00Z",
			waitReason: "ReqNodeNotAvail, UnavailableNodes:n[1-3]", expectedStart: "2026-12-06T07:00:00Z",
		},
		"A probe failure from before the sidecar restarted is not what Slurm says now.": {
			obs: Observation{
				Pod:    slurmShadowPod(time.Minute, corev1.ContainerStatus{State: running(9 * time.Minute)}, nil),
				Events: []corev1.Event{sidecarProbeEvent(queuedLine, 5*time.Minute)},
			},
			state: WaitingForNode, reason: ReasonWaitingForNode, message: "the job is not running yet",
		},
		"A running sidecar decides nothing: the shadow with its node found is Ready.": {
			obs:   Observation{Pod: slurmShadowPod(time.Hour, nodeFound, &corev1.ContainerStatus{State: running(time.Minute), Ready: true})},
			state: Ready, node: "10.213.0.3",
		},
		"A crashing wait-reason sidecar does not fail a Ready tunnel.": {
			obs: Observation{Pod: func() *corev1.Pod {
				p := slurmShadowPod(time.Hour, nodeFound, &corev1.ContainerStatus{State: running(time.Hour), Ready: true})
				sc := &p.Status.InitContainerStatuses[0]
				sc.State, sc.LastTerminationState, sc.Ready = waiting("CrashLoopBackOff"), exited(137, ""), false
				return p
			}()},
			state: Ready, node: "10.213.0.3",
		},
		"A node wait that timed out is Failed with the reason of its termination message.": {
			obs:   Observation{Pod: shadowPod(corev1.ContainerStatus{State: exited(1, "NodeWaitTimedOut: no compute node after 20s: job abc is PENDING in Slurm\nmore")}, nil)},
			state: Failed, reason: ReasonNodeWaitTimedOut, message: "job abc is PENDING", container: "wait-for-node",
		},
		"A node wait restarted after timing out stays Failed until it succeeds.": {
			obs: Observation{Pod: shadowPod(corev1.ContainerStatus{State: running(5 * time.Second), RestartCount: 1,
				LastTerminationState: exited(1, "NodeWaitTimedOut: no compute node after 20s")}, nil)},
			state: Failed, reason: ReasonNodeWaitTimedOut,
		},
		"A node wait that timed out after its job completed is Ended with JobCompleted, not Failed.": {
			obs:   Observation{Pod: shadowPod(corev1.ContainerStatus{State: exited(1, "JobCompleted: job abc COMPLETED in Slurm: the pod's batch job has ended, and its tunnel with it")}, nil)},
			state: Ended, reason: ReasonJobCompleted, message: "COMPLETED", container: "wait-for-node",
		},
		"A node wait restarted after its job completed stays Ended.": {
			obs: Observation{Pod: shadowPod(corev1.ContainerStatus{State: running(5 * time.Second), RestartCount: 1,
				LastTerminationState: exited(1, "JobCompleted: job abc COMPLETED in Slurm")}, nil)},
			state: Ended, reason: ReasonJobCompleted,
		},
		"A forward that is ready makes the tunnel Ready, leading to the node wait-for-node found.": {
			obs:   Observation{Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(time.Minute), Ready: true})},
			state: Ready, reason: ReasonReady, node: "10.213.0.3",
		},
		"The node ConfigMap's compute node wins over the one wait-for-node found.": {
			obs:   Observation{NodeConfigMap: "10.213.0.2", Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(time.Minute), Ready: true})},
			state: Ready, node: "10.213.0.2",
		},
		"A forward whose probe fails after the startup grace is Failed with the probe's reason.": {
			obs: Observation{Now: now, Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(2 * time.Minute)}),
				Events: []corev1.Event{
					probeEvent("ssh-forward", "Readiness probe failed: NodeConnectionRefused: port 8888 on 10.213.0.3 refused", 90*time.Second),
					probeEvent("ssh-forward", "(combined from similar events): Readiness probe failed: ForwardingProhibited: channel to 10.213.0.3:8888 administratively prohibited", 5*time.Second),
				}},
			state: Failed, reason: ReasonForwardingProhibited, message: "administratively prohibited", container: "ssh-forward",
		},
		"A forward whose probe says its job completed is Ended with JobCompleted, not Failed.": {
			obs: Observation{Now: now, Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(2 * time.Hour)}),
				Events: []corev1.Event{
					probeEvent("ssh-forward", "Readiness probe failed: NodeConnectionRefused: port 8888 on 10.213.0.3 refused", 20*time.Second),
					probeEvent("ssh-forward", "Readiness probe failed: JobCompleted: job abc COMPLETED in Slurm: the pod's batch job has ended, and its tunnel with it", 5*time.Second),
				}},
			state: Ended, reason: ReasonJobCompleted, message: "COMPLETED in Slurm", container: "ssh-forward",
		},
		"A forward whose probe says no job runs, not that it completed, is Failed with NoRunningJob.": {
			obs: Observation{Now: now, Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(2 * time.Hour)}),
				Events: []corev1.Event{probeEvent("ssh-forward", "Readiness probe failed: NoRunningJob: no running job named abc in Slurm: it ended (COMPLETED, CANCELLED), unless the plugin submits it again", 5*time.Second)}},
			state: Failed, reason: ReasonNoRunningJob, container: "ssh-forward",
		},
		"A forward that exited saying its job completed is Ended.": {
			obs:   Observation{Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: exited(1, "JobCompleted: job abc COMPLETED in Slurm")})},
			state: Ended, reason: ReasonJobCompleted, container: "ssh-forward",
		},
		"A forward whose probe fails within the startup grace is still Starting.": {
			obs: Observation{Now: now, Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(10 * time.Second)}),
				Events: []corev1.Event{probeEvent("ssh-forward", "Readiness probe failed: NodeConnectionRefused: port 8888 refused", time.Second)}},
			state: Starting, container: "ssh-forward",
		},
		"Probe failures from before the container started do not count.": {
			obs: Observation{Now: now, Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(2 * time.Minute)}),
				Events: []corev1.Event{probeEvent("ssh-forward", "Readiness probe failed: LoginRefused: old", 3*time.Minute)}},
			state: Starting,
		},
		"Another container's probe failures do not count.": {
			obs: Observation{Now: now, Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(2 * time.Minute)}),
				Events: []corev1.Event{probeEvent("ssh-reverse", "Readiness probe failed: NodeHopRefused: x", time.Second)}},
			state: Starting,
		},
		"A forward in crash-loop back-off is Failed with its last termination message.": {
			obs: Observation{Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: waiting("CrashLoopBackOff"), RestartCount: 3,
				LastTerminationState: exited(1, "LoginUnreachable: ssh to sgsite@127.0.0.2:2222: Connection refused")})},
			state: Failed, reason: ReasonLoginUnreachable, message: "Connection refused", container: "ssh-forward",
		},
		"A forward restarted after a failure stays Failed while it connects.": {
			obs: Observation{Now: now, Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(time.Second), RestartCount: 3,
				LastTerminationState: exited(1, "LoginUnreachable: Connection refused")})},
			state: Failed, reason: ReasonLoginUnreachable,
		},
		"A forward restarted after a failure that is ready again is Ready.": {
			obs: Observation{Now: now, Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(time.Second), Ready: true, RestartCount: 3,
				LastTerminationState: exited(1, "LoginUnreachable: Connection refused")})},
			state: Ready,
		},
		"A termination message in no known shape is TunnelDown, kept as said.": {
			obs:   Observation{Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: exited(255, "kex_exchange_identification: read: Connection reset")})},
			state: Failed, reason: ReasonTunnelDown, message: "kex_exchange_identification",
		},
		"A termination message with escape sequences is kept printable.": {
			obs:   Observation{Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: exited(1, "LoginUnreachable: \x1b[31mred\x1b[0m \u202eevil")})},
			state: Failed, reason: ReasonLoginUnreachable, message: `\x1b[31mred\x1b[0m \u202eevil`,
		},
		"A probe's output with escape sequences is kept printable.": {
			obs: Observation{Now: now, Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: running(2 * time.Minute)}),
				Events: []corev1.Event{probeEvent("ssh-forward", "Readiness probe failed: NodeUnreachable: \x1b[2Jgone\r", 5*time.Second)}},
			state: Failed, reason: ReasonNodeUnreachable, message: `\x1b[2Jgone`,
		},
		"A node wait-for-node found is printable.": {
			obs:   Observation{Pod: shadowPod(corev1.ContainerStatus{State: exited(0, "NodeFound: n1\x1b[2J")}, &corev1.ContainerStatus{State: running(time.Minute), Ready: true})},
			state: Ready, node: `n1\x1b[2J`,
		},
		"A container that failed without a message is TunnelDown saying its exit code.": {
			obs:   Observation{Pod: shadowPod(nodeFound, &corev1.ContainerStatus{State: exited(137, "")})},
			state: Failed, reason: ReasonTunnelDown, message: "code 137",
		},
		"A shadow pod waiting for a missing Secret is Failed with CredentialMissing.": {
			obs: Observation{MissingCredentials: []string{"Secret site-ssh-key"},
				Pod: shadowPod(corev1.ContainerStatus{State: waiting("PodInitializing")}, &corev1.ContainerStatus{State: waiting("PodInitializing")})},
			state: Failed, reason: ReasonCredentialMissing, message: "Secret site-ssh-key not in namespace user-shadow",
		},
		"A shadow pod creating its containers with every credential there is Starting.": {
			obs:   Observation{Pod: shadowPod(corev1.ContainerStatus{State: waiting("PodInitializing")}, nil)},
			state: Starting,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.obs.Now.IsZero() {
				tc.obs.Now = now
			}
			got := Observe(tc.obs)
			if got.State != tc.state || (tc.reason != "" && got.Reason != tc.reason) || !strings.Contains(got.Message, tc.message) ||
				(tc.container != "" && got.Container != tc.container) || (tc.node != "" && got.ComputeNode != tc.node) ||
				got.WaitReason != tc.waitReason || got.ExpectedStart != tc.expectedStart {
				t.Errorf("Observe = %+v, want state %s, reason %q, container %q, node %q, message containing %q, Slurm's reason %q and start %q",
					got, tc.state, tc.reason, tc.container, tc.node, tc.message, tc.waitReason, tc.expectedStart)
			}
		})
	}
}

func TestParseReasonLine(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		reason  Reason
		message string
	}{
		"A known reason is read with its message.":               {"LoginRefused: sgsite@login:22 refused publickey", ReasonLoginRefused, "sgsite@login:22 refused publickey"},
		"Only the first line counts.":                            {"NodeFound: 10.0.0.1\nlater lines", ReasonNodeFound, "10.0.0.1"},
		"An unknown reason is TunnelDown with the whole line":    {"Bogus: something", ReasonTunnelDown, "Bogus: something"},
		"A line without a reason is TunnelDown.":                 {"ssh: connect to host x port 22: Connection refused", ReasonTunnelDown, "ssh: connect to host x port 22: Connection refused"},
		"A long message is cut.":                                 {"TunnelDown: " + strings.Repeat("x", 2000), ReasonTunnelDown, strings.Repeat("x", maxMessage) + "..."},
		"Control characters in a message are escaped, not kept.": {"LoginRefused: \x1b[2J\u202eok\u009b", ReasonLoginRefused, `\x1b[2J\u202eok\u009b`},
		"A line in no known shape is escaped as well.":           {"\x1b]0;owned\x07 down", ReasonTunnelDown, `\x1b]0;owned\a down`},
	} {
		t.Run(name, func(t *testing.T) {
			r, m := ParseReasonLine(tc.in)
			if r != tc.reason || m != tc.message {
				t.Errorf("ParseReasonLine(%q) = %q, %q; want %q, %q", tc.in, r, m, tc.reason, tc.message)
			}
		})
	}
}

func TestEveryFailureHasARemedy(t *testing.T) {
	for _, r := range append(ScriptReasons, ReasonCredentialMissing) {
		switch r {
		case ReasonReady, ReasonConnecting, ReasonNodeFound, ReasonWaitingForNode:
			continue
		case ReasonJobCompleted:
			// A job that completed is no failure: nothing is to be done.
			if got := Remedy(r, Context{Node: "hpc-vk"}); got != "" {
				t.Errorf("reason %s, a job that ran to its end, has remedy %q", r, got)
			}
			continue
		}
		if Remedy(r, Context{Node: "hpc-vk"}) == "" {
			t.Errorf("reason %s has no remedy", r)
		}
	}
}

func TestSlurmPending(t *testing.T) {
	for name, tc := range map[string]struct {
		msg, reason, start string
	}{
		"A reason and a start in UTC are read.":                       {"job 1 is PENDING in Slurm (reason BeginTime, expected start 2026-12-06T07:00:00Z): waiting for it to run", "BeginTime", "2026-12-06T07:00:00Z"},
		"A reason with commas and brackets is read whole.":            {queuedLine, "ReqNodeNotAvail, UnavailableNodes:n[1-3]", "2026-12-06T07:00:00Z"},
		"No estimate is read as Slurm says it.":                       {"job 1 is PENDING in Slurm (reason Priority, expected start N/A): waiting", "Priority", "N/A"},
		"What the shadow could not read stays unreadable.":            {"job 1 is PENDING in Slurm (reason unreadable, expected start unreadable): waiting", "unreadable", "unreadable"},
		"A message without Slurm's words has neither.":                {"the job is not running yet, so its compute node is not known", "", ""},
		"A start in another shape is refused with the reason.":        {"job 1 (reason Priority, expected start tomorrow): waiting", "", ""},
		"A reason with a character slurm_pending refuses is refused.": {"job 1 (reason Prio\x1b[2J, expected start N/A): waiting", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			if reason, start := slurmPending(tc.msg); reason != tc.reason || start != tc.start {
				t.Errorf("slurmPending(%q) = %q, %q; want %q, %q", tc.msg, reason, start, tc.reason, tc.start)
			}
		})
	}
}

func TestTheStateRoundTripsThroughATunnelsStatus(t *testing.T) {
	in := Status{State: WaitingForNode, Reason: ReasonWaitingForNode, Message: "m", Container: "wait-for-node", ComputeNode: "n", WaitReason: "BeginTime",
		ExpectedStart: "2026-12-06T07:00:00Z", ForwardMode: "exec", Service: "a/b", Ports: []int32{8888}, Since: now}
	var st v1alpha1.TunnelStatus
	in.Into(&st)
	out, ok := Of(&st)
	if !ok || !reflect.DeepEqual(out, in) {
		t.Errorf("Of(Into(%+v)) = %+v, %t", in, out, ok)
	}
	if _, ok := Of(&v1alpha1.TunnelStatus{Shadow: &v1alpha1.ShadowStatus{State: "Rolling"}}); ok {
		t.Error("a status with the shadow's state alone holds a tunnel state")
	}
}

func TestMountFailed(t *testing.T) {
	evs := []corev1.Event{{Reason: "FailedMount", Message: `MountVolume.SetUp failed for volume "ssh-key" : secret "site-ssh-key" not found`}}
	if !MountFailed(evs, "Secret", "site-ssh-key") {
		t.Error("the kubelet's FailedMount for the Secret was not read")
	}
	if MountFailed(evs, "Secret", "other") || MountFailed(evs, "ConfigMap", "site-ssh-key") {
		t.Error("a FailedMount Event was read for another object")
	}
}

func TestRemedyBehindABastionNamesIt(t *testing.T) {
	c := Context{Node: "hpc-vk", SSH: policy.SSH{LoginHost: "login.hpc.example.org", User: "alice", Port: 22,
		KnownHostsConfigMap: "hpc-known-hosts", Bastion: policy.Bastion{Host: "bastion.hpc.example.org", Port: 2222}}}
	for r, want := range map[Reason]string{
		ReasonHostKeyUnknown:   "ssh-keyscan -p 2222 bastion.hpc.example.org",
		ReasonLoginRefused:     "the bastion alice@bastion.hpc.example.org:2222",
		ReasonLoginUnreachable: "through the bastion alice@bastion.hpc.example.org:2222",
	} {
		if got := Remedy(r, c); !strings.Contains(got, want) {
			t.Errorf("Remedy(%s) = %q, want it to say %q", r, got, want)
		}
	}
	c.SSH.Bastion = policy.Bastion{}
	if got := Remedy(ReasonLoginUnreachable, c); strings.Contains(got, "bastion") {
		t.Errorf("Remedy without a bastion mentions one: %q", got)
	}
}
