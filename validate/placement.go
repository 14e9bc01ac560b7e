package validate

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// VirtualNodeFor returns the virtual node a pod belongs to: the one named by spec.nodeName,
// else by the kubernetes.io/hostname node selector, else, when the policy lists exactly one
// virtual node, that one if the pod tolerates virtual-node.interlink/no-schedule. A pod that
// names a node the policy does not list belongs to none.
func VirtualNodeFor(spec *corev1.PodSpec, pol *policy.Policy) (string, bool) {
	if name := spec.NodeName; name != "" {
		_, ok := pol.VirtualNodes[name]
		return name, ok
	}
	if name, set := spec.NodeSelector[LabelHostname]; set {
		_, ok := pol.VirtualNodes[name]
		return name, ok
	}
	if len(pol.VirtualNodes) != 1 || !toleratesVirtualNode(spec.Tolerations) {
		return "", false
	}
	for name := range pol.VirtualNodes {
		return name, true
	}
	return "", false
}

func toleratesVirtualNode(tolerations []corev1.Toleration) bool {
	for _, t := range tolerations {
		keyMatches := t.Key == TolerationVirtualNode || (t.Key == "" && t.Operator == corev1.TolerationOpExists)
		effectMatches := t.Effect == "" || t.Effect == corev1.TaintEffectNoSchedule
		if keyMatches && effectMatches {
			return true
		}
	}
	return false
}
