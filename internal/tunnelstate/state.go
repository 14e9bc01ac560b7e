package tunnelstate

import (
	"encoding/json"
	"fmt"
	"time"
)

// AnnotationTunnelState is the offloaded pod's annotation holding its tunnel's Status as JSON,
// written by shadowgate alone, for tools (shadowgate status).
const AnnotationTunnelState = "interlink.eu/tunnel-state"

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
	ForwardMode string `json:"forwardMode,omitempty"`
	// Service is the shadow Service, <namespace>/<name>, that reaches the pod's ports.
	Service string  `json:"service,omitempty"`
	Ports   []int32 `json:"ports,omitempty"`
	// Since is when State, Reason and ComputeNode took their values.
	Since time.Time `json:"since"`
}

// Changed says whether next differs from s in what an Event is recorded for: the state, the
// reason, or the compute node the tunnel leads to.
func (s Status) Changed(next Status) bool {
	return s.State != next.State || s.Reason != next.Reason || s.ComputeNode != next.ComputeNode
}

// Encode is the annotation value of s.
func (s Status) Encode() string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a struct of strings, ints and a time always marshals
	}
	return string(b)
}

// Decode reads an annotation value written by Encode; one that holds no State of this
// package's is refused. Anyone who may update the pod can write the annotation, so what a
// decoded Status holds is printed only made printable.
func Decode(v string) (Status, error) {
	var s Status
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return Status{}, fmt.Errorf("annotation %s: %w", AnnotationTunnelState, err)
	}
	switch s.State {
	case Starting, WaitingForNode, Ready, Failed, Ended:
		return s, nil
	case "":
		return Status{}, fmt.Errorf("annotation %s holds no state", AnnotationTunnelState)
	}
	return Status{}, fmt.Errorf("annotation %s: unknown state %q", AnnotationTunnelState, s.State)
}
