package tunnelstate

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/internal/printable"
)

// Observation is what shadowgate sees of one offloaded pod's shadow.
type Observation struct {
	// Pod is the shadow pod (the Deployment's newest that is not being deleted), nil while
	// there is none.
	Pod *corev1.Pod
	// Events are the Events recorded on Pod; only the kubelet's probe failures are read.
	Events []corev1.Event
	// MissingCredentials names what Pod mounts and its namespace lacks ("Secret site-ssh-key"),
	// looked up while WaitsForVolumes(Pod).
	MissingCredentials []string
	// NodeConfigMap is the node ConfigMap's compute-node, "" when it holds none.
	NodeConfigMap string
	Now           time.Time
}

// Finished is the state of a tunnel whose pod has finished: Ended with JobCompleted when the
// pod Succeeded (its job completed), Failed with NoRunningJob when it Failed (its job was
// cancelled, timed out or lost), since then the tunnel went with a job that did not end as the
// pod's owner meant. A tunnel already Ended (Slurm said the job completed before the pod was
// seen finished) keeps that state: the reporter does not ask Finished for it.
func Finished(pod *corev1.Pod, last Status) Status {
	if pod.Status.Phase == corev1.PodSucceeded {
		return with(last, Ended, ReasonJobCompleted, "", "the pod succeeded: its batch job completed, and its shadow is removed")
	}
	return with(last, Failed, ReasonNoRunningJob, "", fmt.Sprintf("the pod has finished (phase %s): its batch job is no longer running, and its shadow is removed", pod.Status.Phase))
}

// StartupGrace is how long after a tunnel container starts a failed check still counts as
// Starting: the job's server may not listen yet when Slurm first reports the job running.
const StartupGrace = 45 * time.Second

// The shadow's init container that waits for the compute node (inject's wait-for-node), and
// the sidecar whose probe carries what Slurm says of the queued job (inject's wait-reason).
const (
	waitForNode = "wait-for-node"
	waitReason  = "wait-reason"
)

// Observe derives the tunnel's state from its shadow pod: the termination messages of the
// containers that exited, the probe Events of those that run but are not ready, the
// credentials the pod waits for. The first container in the pod's order that is not fine
// decides. A container restarted after a failure stays Failed, with its last reason, until it
// is ready again: a failure that comes back on every restart is reported once, not flapping
// between Starting and Failed. A container that says its job completed (JobCompleted) makes
// the tunnel Ended instead (failure). Service, Ports and ForwardMode are left for the caller.
func Observe(o Observation) Status {
	st := Status{ComputeNode: printable.String(o.NodeConfigMap)}
	if o.Pod == nil {
		return with(st, Starting, "", "", "the shadow pod is not created yet")
	}
	if st.ComputeNode == "" {
		st.ComputeNode = foundNode(o.Pod)
	}
	inits := o.Pod.Status.InitContainerStatuses
	for _, c := range o.Pod.Spec.InitContainers {
		cs := statusOf(inits, c.Name)
		if cs == nil {
			return with(st, Starting, "", c.Name, "the shadow pod is being scheduled")
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			continue
		}
		// wait-reason decides nothing, whatever its state: it only carries what Slurm says of
		// the queued job (waitingForNode).
		if c.Name == waitReason {
			continue
		}
		if v, decided := failedOrWaiting(o, cs, st); decided {
			return v
		}
		if last := lastFailure(cs); last != nil {
			return failed(st, c.Name, last)
		}
		if cs.State.Running != nil && c.Name == waitForNode {
			return waitingForNode(o, st)
		}
		return with(st, Starting, "", c.Name, "the shadow pod is starting")
	}
	if len(o.Pod.Spec.Containers) == 0 {
		return with(st, Starting, "", "", "the shadow pod has no containers")
	}
	for _, c := range o.Pod.Spec.Containers {
		cs := statusOf(o.Pod.Status.ContainerStatuses, c.Name)
		if cs == nil {
			return with(st, Starting, "", c.Name, "the shadow pod is starting")
		}
		if cs.Ready {
			continue
		}
		if v, decided := failedOrWaiting(o, cs, st); decided {
			return v
		}
		r := cs.State.Running
		if r == nil {
			return with(st, Starting, "", c.Name, "the shadow pod is starting")
		}
		reason, msg, ok := lastProbeFailure(o.Events, "spec.containers{"+c.Name+"}", r.StartedAt.Time)
		switch {
		case !ok || reason == ReasonConnecting:
			if last := lastFailure(cs); last != nil {
				return failed(st, c.Name, last)
			}
			return with(st, Starting, "", c.Name, "the tunnel is being checked")
		case o.Now.Sub(r.StartedAt.Time) < StartupGrace && lastFailure(cs) == nil:
			return with(st, Starting, "", c.Name, "the tunnel is being checked: "+msg)
		case reason == ReasonWaitingForNode:
			return with(st, WaitingForNode, reason, c.Name, msg)
		default:
			return with(st, failure(reason), reason, c.Name, msg)
		}
	}
	return with(st, Ready, ReasonReady, "", "every part of the tunnel carries traffic")
}

// waitingForNode is the state while wait-for-node runs: with what Slurm says of the queued job
// when wait-reason's probe has printed it since the sidecar started (under NodeDiscovery
// slurm), its reason and expected start in their own fields.
func waitingForNode(o Observation, st Status) Status {
	msg := "the job is not running yet, so its compute node is not known"
	if sc := statusOf(o.Pod.Status.InitContainerStatuses, waitReason); sc != nil && sc.State.Running != nil {
		if reason, said, ok := lastProbeFailure(o.Events, "spec.initContainers{"+waitReason+"}", sc.State.Running.StartedAt.Time); ok && reason == ReasonWaitingForNode {
			msg = said
			st.WaitReason, st.ExpectedStart = slurmPending(said)
		}
	}
	return with(st, WaitingForNode, ReasonWaitingForNode, waitForNode, msg)
}

// slurmPending is the reason and expected start in a WaitingForNode message of the scripts
// (common.sh: slurm_pending, "... (reason <reason>, expected start <start>)..."), each ""
// when the message holds none. The reason may hold commas and brackets, the start neither.
func slurmPending(msg string) (reason, start string) {
	const open, mid = " (reason ", ", expected start "
	i := strings.Index(msg, open)
	j := strings.LastIndex(msg, mid)
	if i < 0 || j < i+len(open) {
		return "", ""
	}
	rest := msg[j+len(mid):]
	k := strings.IndexByte(rest, ')')
	if k < 0 {
		return "", ""
	}
	reason, start = msg[i+len(open):j], rest[:k]
	if !pendingReason.MatchString(reason) || !pendingStart.MatchString(start) {
		return "", ""
	}
	return reason, start
}

// What slurm_pending lets through of squeue's %r and %S (or says is unreadable).
var (
	pendingReason = regexp.MustCompile(`^[]A-Za-z0-9_,:.()\[ -]{1,128}$`)
	pendingStart  = regexp.MustCompile(`^(N/A|Unknown|unreadable|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)$`)
)

// failedOrWaiting decides for a container that has failed (exited non-zero, now or before its
// restart) or that waits for its volumes; decided is false for any other.
func failedOrWaiting(o Observation, cs *corev1.ContainerStatus, st Status) (Status, bool) {
	if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
		return failed(st, cs.Name, t), true
	}
	if w := cs.State.Waiting; w != nil {
		if last := lastFailure(cs); last != nil {
			return failed(st, cs.Name, last), true
		}
		if len(o.MissingCredentials) > 0 {
			return with(st, Failed, ReasonCredentialMissing, cs.Name,
				fmt.Sprintf("the shadow pod cannot start: %s not in namespace %s", strings.Join(o.MissingCredentials, " and "), o.Pod.Namespace)), true
		}
	}
	return Status{}, false
}

// lastFailure is the container's last termination when it was a failure.
func lastFailure(cs *corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
		return t
	}
	return nil
}

func failed(st Status, container string, t *corev1.ContainerStateTerminated) Status {
	if strings.TrimSpace(t.Message) == "" {
		return with(st, Failed, ReasonTunnelDown, container, fmt.Sprintf("%s exited with code %d (%s) and left no message", container, t.ExitCode, t.Reason))
	}
	reason, msg := ParseReasonLine(t.Message)
	return with(st, failure(reason), reason, container, msg)
}

// failure is the state a container that stopped working for reason puts the tunnel in:
// Ended when its job completed (JobCompleted), since then the tunnel closed with the job as
// it should; Failed for any other reason.
func failure(reason Reason) State {
	if reason == ReasonJobCompleted {
		return Ended
	}
	return Failed
}

func with(st Status, state State, reason Reason, container, message string) Status {
	st.State, st.Reason, st.Container, st.Message = state, reason, container, message
	return st
}

func statusOf(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// foundNode is the node wait-for-node reported (`NodeFound: <node>`) when it finished.
func foundNode(pod *corev1.Pod) string {
	cs := statusOf(pod.Status.InitContainerStatuses, waitForNode)
	if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
		return ""
	}
	if reason, node := ParseReasonLine(cs.State.Terminated.Message); reason == ReasonNodeFound && !strings.ContainsAny(node, " \t") {
		return node
	}
	return ""
}

// probeFailed is how the kubelet starts a failed readiness probe's Event message; the
// EventCorrelator may put "(combined from similar events): " before it.
const probeFailed = "Readiness probe failed: "

// lastProbeFailure is the reason line of the newest readiness probe failure the kubelet
// recorded for the container at fieldPath (spec.containers{<name>}, or
// spec.initContainers{<name>} for a sidecar) since it started.
func lastProbeFailure(events []corev1.Event, fieldPath string, since time.Time) (Reason, string, bool) {
	var newest time.Time
	var line string
	for i := range events {
		e := &events[i]
		if e.Reason != "Unhealthy" || e.InvolvedObject.FieldPath != fieldPath {
			continue
		}
		_, text, ok := strings.Cut(e.Message, probeFailed)
		if !ok {
			continue
		}
		if at := EventTime(e); !at.Before(since.Truncate(time.Second)) && at.After(newest) {
			newest, line = at, text
		}
	}
	if newest.IsZero() {
		return "", "", false
	}
	reason, msg := ParseReasonLine(line)
	return reason, msg, true
}

// EventTime is when an Event was last seen, whichever API wrote it.
func EventTime(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	return t
}

// WaitsForNode says whether the shadow pod's wait-for-node runs beside a wait-reason sidecar
// (NodeDiscovery slurm): the job is queued, and what Slurm says of it is in the sidecar's
// probe Events.
func WaitsForNode(pod *corev1.Pod) bool {
	cs := statusOf(pod.Status.InitContainerStatuses, waitForNode)
	return cs != nil && cs.State.Running != nil && statusOf(pod.Status.InitContainerStatuses, waitReason) != nil
}

// WaitReasonMark is the wait-reason sidecar's status as a comparable mark, and whether the
// sidecar is ready; "" without one. Its probe fails, turning it not ready, once per change of
// what Slurm says (wait-reason.sh): while its mark stays the same and it is ready, its Events
// hold nothing new.
func WaitReasonMark(pod *corev1.Pod) (mark string, ready bool) {
	cs := statusOf(pod.Status.InitContainerStatuses, waitReason)
	if cs == nil {
		return "", false
	}
	var started time.Time
	if cs.State.Running != nil {
		started = cs.State.Running.StartedAt.Time
	}
	return fmt.Sprintf("%s %d %t %s", cs.ContainerID, cs.RestartCount, cs.Ready, started.UTC().Format(time.RFC3339Nano)), cs.Ready
}

// WaitReasonEvents are those of events the wait-reason sidecar's probe recorded, all Observe
// reads of a shadow pod waiting for its compute node.
func WaitReasonEvents(events []corev1.Event) []corev1.Event {
	var out []corev1.Event
	for i := range events {
		if events[i].InvolvedObject.FieldPath == "spec.initContainers{"+waitReason+"}" {
			out = append(out, events[i])
		}
	}
	return out
}

// WaitsForVolumes says whether the shadow pod's containers wait to be created, which is
// where a missing Secret or ConfigMap leaves a pod: then the caller looks its credentials up.
func WaitsForVolumes(pod *corev1.Pod) bool {
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if w := cs.State.Waiting; w != nil {
				switch w.Reason {
				case "ContainerCreating", "PodInitializing", "CreateContainerConfigError":
					return true
				}
			}
		}
	}
	return pod.Status.Phase == corev1.PodPending && len(pod.Status.InitContainerStatuses)+len(pod.Status.ContainerStatuses) == 0 && pod.Spec.NodeName != ""
}

// MountFailed says whether the kubelet recorded that a volume of kind ("Secret" or
// "ConfigMap") and name could not be mounted because it does not exist: its FailedMount
// Event says `... : secret "<name>" not found`.
func MountFailed(events []corev1.Event, kind, name string) bool {
	want := fmt.Sprintf("%s %q not found", strings.ToLower(kind), name)
	for i := range events {
		if events[i].Reason == "FailedMount" && strings.Contains(events[i].Message, want) {
			return true
		}
	}
	return false
}
