package podrun

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Event is one Event the kubelet would record about the pod, in the kubelet's words; the node
// sends it to the API server (Config.Record).
type Event struct {
	// FieldPath is the container's, as in the kubelet's container references
	// (spec.containers{name}, spec.initContainers{name}); empty for the pod itself.
	FieldPath string
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type, Reason, Message string
}

// The kubelet's reasons (pkg/kubelet/events) for the Events a pod here gets.
const (
	reasonUnhealthy   = "Unhealthy"
	reasonBackOff     = "BackOff"
	reasonFailedMount = "FailedMount"
)

// mountRetryMax is the kubelet's longest wait between two attempts at a volume that failed
// (maxDurationBeforeRetry of its pending operations); each failed attempt is a FailedMount
// Event, so they come at doubling intervals up to this one rather than at every retry here.
const mountRetryMax = 2*time.Minute + 2*time.Second

func (p *Pod) record(e Event) {
	if p.cfg.Record != nil {
		p.cfg.Record(e)
	}
}

// fieldPath is the container's within the pod, as the kubelet's references name it.
func (c *container) fieldPath() string {
	if c.init {
		return "spec.initContainers{" + c.spec.Name + "}"
	}
	return "spec.containers{" + c.spec.Name + "}"
}

func (c *container) warn(reason, message string) {
	c.pod.record(Event{FieldPath: c.fieldPath(), Type: corev1.EventTypeWarning, Reason: reason, Message: message})
}
