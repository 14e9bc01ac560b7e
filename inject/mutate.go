package inject

import (
	"crypto/rand"
	"fmt"
	"io"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate"
)

// MutatePod makes an offloaded pod ready for the reverse tunnel it asks for: it records the
// relay's loopback address in interlink.eu/reverse-bind when the pod names none, and prepends
// the pre-exec snippet to slurm-job.vk.io/pre-exec, keeping the user's own pre-exec after it.
// It works in place and is idempotent: the webhook may be invoked again (reinvocation), and
// `shadowgate render` may be given a pod it rendered before. A pod that asks for no reverse
// tunnel is left alone.
func MutatePod(pod *corev1.Pod, o *validate.Offload) []string {
	return mutatePod(pod, o, rand.Reader)
}

func mutatePod(pod *corev1.Pod, o *validate.Offload, random io.Reader) []string {
	if o == nil || !o.WantsReverse() {
		return nil
	}
	var warnings []string
	bind, err := o.Bind, error(nil)
	if !bind.IsValid() {
		bind, err = chooseBind(random)
	}
	snippet := ""
	if err == nil {
		snippet, err = preExec(o, bind)
	}
	if err != nil {
		// The pod is admitted by now; its job must still not run without the tunnel.
		snippet = markerBegin + "\n" + failedSnippet + markerEnd + "\n"
		warnings = append(warnings, fmt.Sprintf("the reverse tunnel could not be set up (%v): the job will stop at start; recreate the pod", err))
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if err == nil && !o.Bind.IsValid() {
		pod.Annotations[validate.AnnotationReverseBind] = bind.String()
		o.Bind = bind
	}
	pod.Annotations[validate.AnnotationPreExec] = snippet + userPreExec(pod.Annotations[validate.AnnotationPreExec])
	return warnings
}

// failedSnippet stands in for the snippet when it could not be made.
const failedSnippet = `echo "interLink: shadowgate could not set up this pod's reverse tunnel (see the pod's admission warnings); the job stops here rather than run without it." >&2
exit 1
`

// userPreExec strips a snippet an earlier invocation prepended, so what remains is the user's.
// Only a block at the very start counts: that is where MutatePod puts it, and a marker the
// user wrote further down is theirs.
func userPreExec(annotation string) string {
	if !strings.HasPrefix(annotation, markerBegin+"\n") {
		return annotation
	}
	end := strings.Index(annotation, "\n"+markerEnd+"\n")
	if end < 0 {
		return annotation
	}
	return annotation[end+len(markerEnd)+2:]
}

// chooseBind picks the relay's loopback address. The mutating phase knows neither the pod's
// UID nor, for a generateName, its name, and replicas of one template are identical, so the
// address is random: 127.1-254.x.1-254 holds about 16.5 million addresses, which keeps two
// pods on one node apart, and leaves 127.0.0.0/16 (127.0.0.1, Debian's 127.0.1.1) alone.
func chooseBind(random io.Reader) (netip.Addr, error) {
	var b [3]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return netip.Addr{}, fmt.Errorf("no randomness to choose %s: %w", validate.AnnotationReverseBind, err)
	}
	return netip.AddrFrom4([4]byte{127, 1 + b[0]%254, b[1], 1 + b[2]%254}), nil
}
