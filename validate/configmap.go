package validate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/syntax"
)

// Node ConfigMap keys and labels (DESIGN.md "Shadow objects").
const (
	ComputeNodeKey  = "compute-node"
	LabelShadowRole = "interlink.eu/shadow-role"
	ShadowRoleNode  = "node"
)

// isNodeConfigMap reports whether cm tells a shadow its compute node: it carries the node
// role label, or a compute-node key that a shadow could mount (a volume mounts binaryData's
// keys as files just as data's).
func isNodeConfigMap(cm *corev1.ConfigMap) bool {
	_, hasKey := cm.Data[ComputeNodeKey]
	_, hasBinary := cm.BinaryData[ComputeNodeKey]
	return hasKey || hasBinary || cm.Labels[LabelShadowRole] == ShadowRoleNode
}

// NodeConfigMap judges a node ConfigMap: compute-node must be empty (the job is not placed
// yet), or a host by the shared rule for a compute node (syntax.Host, DialedByLoginNode). The shadow passes it to ssh, so anything else is
// refused rather than escaped. A compute-node in binaryData would reach the shadow's volume as
// the same file, so it is refused whatever it holds.
func NodeConfigMap(cm *corev1.ConfigMap) Decision {
	var d Decision
	if b, ok := cm.BinaryData[ComputeNodeKey]; ok {
		d.Errors = append(d.Errors, field.Invalid(field.NewPath("binaryData").Key(ComputeNodeKey), string(b),
			"refusing a compute node in binaryData: the shadow would read it as its compute node unchecked; write the node's hostname or IP address under data[compute-node] instead"))
	}
	node := cm.Data[ComputeNodeKey]
	if node == "" {
		return d
	}
	nodePath := field.NewPath("data").Key(ComputeNodeKey)
	const what = "The shadow passes this to ssh, so it is refused rather than escaped; the plugin should report what the node calls itself (hostname -f)"
	if len(node) > maxEchoed {
		// Not echoed: the refusal would carry all of it.
		d.Errors = append(d.Errors, tooLong(nodePath, len(node), maxEchoed, "a hostname has at most 253 characters. "+what))
	} else if ok, why := syntax.Host(node, syntax.DialedByLoginNode); !ok {
		d.Errors = append(d.Errors, field.Invalid(nodePath, node, fmt.Sprintf("refusing compute node %q: %s. %s", node, why, what)))
	}
	return d
}
