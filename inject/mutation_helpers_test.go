package inject

import (
	"crypto/rand"
	"io"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate"
)

// mutateInPlace gives pod what the mutating phase prepares for it, and o the relay address it
// chose, as the validating phase would read it back from the pod.
func mutateInPlace(pod *corev1.Pod, o *validate.Offload) []string {
	return mutateInPlaceWith(pod, o, rand.Reader)
}

func mutateInPlaceWith(pod *corev1.Pod, o *validate.Offload, random io.Reader) []string {
	annotations, bind, warnings := prepare(pod, o, random)
	Mutation{Annotations: annotations}.Apply(pod)
	if o != nil && bind.IsValid() {
		o.Bind = bind
	}
	return warnings
}
