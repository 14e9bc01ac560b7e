package inject

import (
	"fmt"
	"io"
	"maps"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate"
)

// prepare returns the annotations an admitted, offloaded pod gets in the mutating phase, and the
// relay address it chose: the pod's own interlink.eu/reverse-bind, else one drawn from random,
// recorded in that annotation; and the pre-exec snippet prepended to slurm-job.vk.io/pre-exec,
// the user's own pre-exec kept after it. It writes into neither argument. It is idempotent: the
// webhook may be invoked again (reinvocation), and `shadowgate render` may be given a pod it
// rendered before. A pod that asks for no reverse tunnel loses a snippet an earlier version of
// it asked for, and is otherwise left alone. The annotations are nil when nothing changes.
func prepare(pod *corev1.Pod, o *validate.Offload, random io.Reader) (annotations map[string]string, bind netip.Addr, warnings []string) {
	if o == nil || !o.WantsReverse() {
		// The snippet would hold the job for ten minutes waiting for a tunnel nobody builds.
		if preExec, ok := pod.Annotations[validate.AnnotationPreExec]; ok && len(snippetBlocks(preExec)) > 0 {
			annotations = maps.Clone(pod.Annotations)
			annotations[validate.AnnotationPreExec] = userPreExec(preExec)
		}
		return annotations, netip.Addr{}, nil
	}
	bind, err := o.Bind, error(nil)
	if !bind.IsValid() {
		bind, err = chooseBind(random)
	}
	snippet := ""
	if err == nil {
		snippet, err = preExec(o, bind)
	}
	annotations = maps.Clone(pod.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	if err != nil {
		// The pod is admitted by now; its job must still not run without the tunnel.
		snippet = markerBegin + "\n" + failedSnippet + markerEnd + "\n"
		warnings = append(warnings, fmt.Sprintf("the reverse tunnel could not be set up (%v): the job will stop at start; recreate the pod", err))
		bind = o.Bind
	} else if !o.Bind.IsValid() {
		annotations[validate.AnnotationReverseBind] = bind.String()
	}
	annotations[validate.AnnotationPreExec] = snippet + userPreExec(pod.Annotations[validate.AnnotationPreExec])
	if maps.Equal(annotations, pod.Annotations) {
		annotations = nil
	}
	return annotations, bind, warnings
}

// failedSnippet stands in for the snippet when it could not be made.
const failedSnippet = `echo "interLink: shadowgate could not set up this pod's reverse tunnel (see the pod's admission warnings); the job stops here rather than run without it." >&2
exit 1
`

// userPreExec strips every snippet an earlier invocation added, so what remains is the user's
// and whatever other webhooks put there, in their order. The block need not be at the start:
// another mutating webhook may have prepended to the pre-exec after ours ran.
func userPreExec(annotation string) string {
	var b strings.Builder
	last := 0
	for _, block := range snippetBlocks(annotation) {
		b.WriteString(annotation[last:block[0]])
		last = block[1]
	}
	b.WriteString(annotation[last:])
	return b.String()
}

// snippetBlocks returns where each of prepare's blocks lies in a pre-exec, as [start, end)
// offsets: a markerBegin line, through the next markerEnd line, each a whole line. A begin line
// without an end (the user's, or a block cut short) is not a block and stays; of two begin
// lines before one end, the block starts at the later one.
func snippetBlocks(preExec string) [][2]int {
	var blocks [][2]int
	start := -1
	for off := 0; off < len(preExec); {
		line, _, _ := strings.Cut(preExec[off:], "\n")
		next := min(off+len(line)+1, len(preExec))
		switch line {
		case markerBegin:
			start = off
		case markerEnd:
			if start >= 0 {
				blocks = append(blocks, [2]int{start, next})
				start = -1
			}
		}
		off = next
	}
	return blocks
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
