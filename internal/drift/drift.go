package drift

import (
	"encoding/json"
	"fmt"
	"time"
)

// Annotation is the offloaded pod's annotation holding its shadow's Status as JSON, written by
// shadowgate alone, and only while the shadow does not match what the policy in force renders.
const Annotation = "interlink.eu/shadow-drift"

// State is where a shadow stands against the policy in force.
type State string

const (
	// Current: the shadow is what the policy in force renders. The annotation is absent.
	Current State = "Current"
	// OutOfDate: the policy in force renders the shadow differently; it waits for its turn to
	// be rolled (a bounded number roll at a time, shadows whose tunnel is in use last).
	OutOfDate State = "OutOfDate"
	// Rolling: the shadow was applied again and its shadow pod is being replaced.
	Rolling State = "Rolling"
	// Refused: the policy in force would refuse the pod, or gives it no shadow. The pod and
	// its shadow are left as they are: the admin decides.
	Refused State = "Refused"
)

// Status is one shadow against the policy in force, as shadowgate last saw it.
type Status struct {
	State State `json:"state"`
	// Reason says, for Refused, what the policy in force refuses.
	Reason string `json:"reason,omitempty"`
	// Since is when State took its value.
	Since time.Time `json:"since"`
}

// Same says whether s and next say the same, whenever each was seen.
func (s Status) Same(next Status) bool { return s.State == next.State && s.Reason == next.Reason }

// Encode is the annotation value of s; Current has none.
func (s Status) Encode() string {
	if s.State == Current {
		return ""
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // strings and a time always marshal
	}
	return string(b)
}

// Of reads the status a pod's annotations hold: Current without the annotation.
func Of(annotations map[string]string) (Status, error) {
	v, ok := annotations[Annotation]
	if !ok {
		return Status{State: Current}, nil
	}
	var s Status
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return Status{}, fmt.Errorf("annotation %s: %w", Annotation, err)
	}
	switch s.State {
	case OutOfDate, Rolling, Refused:
		return s, nil
	}
	return Status{}, fmt.Errorf("annotation %s: unknown state %q", Annotation, s.State)
}
