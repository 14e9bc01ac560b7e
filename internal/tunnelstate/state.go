package tunnelstate

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
)

// State is where a tunnel stands.
type State string

const (
	// Starting: the shadow pod is being created, or its tunnel containers have not finished
	// their first checks (or fail only within the startup grace, while the job's server comes
	// up).
	Starting State = "Starting"
	// WaitingForNode: the job is queued; the shadow waits for its compute node.
	WaitingForNode State = "WaitingForNode"
	// Ready: every part of the tunnel carries traffic.
	Ready State = "Ready"
	// Failed: a part of the tunnel does not work, for Reason.
	Failed State = "Failed"
	// Ended: the pod has finished, or Slurm says its job completed (JobCompleted); its job
	// left the compute node and its shadow is removed, or soon will be.
	Ended State = "Ended"
)

// Status is one pod's tunnel as shadowgate last saw it.
type Status struct {
	State   State  `json:"state"`
	Reason  Reason `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Container is the shadow container the reason comes from.
	Container string `json:"container,omitempty"`
	// ComputeNode is where the tunnel leads: the node ConfigMap's compute-node, else the
	// node wait-for-node found when the shadow pod started.
	ComputeNode string `json:"computeNode,omitempty"`
	// WaitReason and ExpectedStart are what Slurm says of the queued job while WaitingForNode
	// (squeue's %r and %S: BeginTime, 2026-12-06T07:00:00Z), under NodeDiscovery slurm.
	WaitReason    string `json:"waitReason,omitempty"`
	ExpectedStart string `json:"expectedStart,omitempty"`
	ForwardMode   string `json:"forwardMode,omitempty"`
	// Service is the shadow Service, <namespace>/<name>, that reaches the pod's ports.
	Service string  `json:"service,omitempty"`
	Ports   []int32 `json:"ports,omitempty"`
	// URLs are the front door's, one per port; empty without one.
	URLs []string `json:"urls,omitempty"`
	// Since is when State, Reason and ComputeNode took their values.
	Since time.Time `json:"since"`
}

// Changed says whether next differs from s in what an Event is recorded for: the state, the
// reason, the compute node the tunnel leads to, or what Slurm says of the queued job (which
// the shadow passes on only when the reason changes or the expected start moves by 10
// minutes or more).
func (s Status) Changed(next Status) bool {
	return s.State != next.State || s.Reason != next.Reason || s.ComputeNode != next.ComputeNode ||
		s.WaitReason != next.WaitReason || s.ExpectedStart != next.ExpectedStart
}

// Into sets the tunnel reporter's fields of a Tunnel's status to s: every one but PodUID and
// Shadow.
func (s Status) Into(st *v1alpha1.TunnelStatus) {
	st.State, st.Reason, st.Message, st.Container = string(s.State), string(s.Reason), s.Message, s.Container
	st.ComputeNode, st.ForwardMode, st.Service, st.Ports, st.URLs = s.ComputeNode, s.ForwardMode, s.Service, s.Ports, s.URLs
	st.WaitReason, st.ExpectedStart = s.WaitReason, s.ExpectedStart
	st.Since = nil
	if !s.Since.IsZero() {
		st.Since = &metav1.Time{Time: s.Since}
	}
}

// Of is the tunnel state a Tunnel's status holds; false when it holds none yet (the reconciler
// may write the shadow's state first).
func Of(st *v1alpha1.TunnelStatus) (Status, bool) {
	if st.State == "" {
		return Status{}, false
	}
	s := Status{State: State(st.State), Reason: Reason(st.Reason), Message: st.Message, Container: st.Container,
		ComputeNode: st.ComputeNode, WaitReason: st.WaitReason, ExpectedStart: st.ExpectedStart,
		ForwardMode: st.ForwardMode, Service: st.Service, Ports: st.Ports, URLs: st.URLs}
	if st.Since != nil {
		s.Since = st.Since.Time
	}
	return s, true
}
