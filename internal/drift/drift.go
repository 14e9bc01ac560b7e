package drift

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
)

// State is where a shadow stands against the policy in force.
type State string

const (
	// Current: the shadow is what the policy in force renders. A Tunnel without the shadow's
	// state says so too.
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

// API is s as a Tunnel's status holds it.
func (s Status) API() *v1alpha1.ShadowStatus {
	st := &v1alpha1.ShadowStatus{State: string(s.State), Reason: s.Reason}
	if !s.Since.IsZero() {
		st.Since = &metav1.Time{Time: s.Since}
	}
	return st
}

// Of is the shadow's state a Tunnel's status holds: Current when it holds none.
func Of(st *v1alpha1.ShadowStatus) Status {
	if st == nil {
		return Status{State: Current}
	}
	s := Status{State: State(st.State), Reason: st.Reason}
	if st.Since != nil {
		s.Since = st.Since.Time
	}
	return s
}
