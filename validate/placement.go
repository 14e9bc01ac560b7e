package validate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// fieldNodeName is the one node field a node selector term's matchFields may name.
const fieldNodeName = "metadata.name"

// VirtualNodeFor returns the virtual node a pod belongs to: the one named by spec.nodeName,
// else by the kubernetes.io/hostname node selector, else, when the policy lists exactly one
// virtual node, that one if the pod tolerates virtual-node.interlink/no-schedule and its
// required node affinity can select it. A pod that names a node the policy does not list
// belongs to none.
//
// The affinity matters for a catch-all toleration (operator Exists, no key): most DaemonSets
// carry one, and the DaemonSet controller pins each of their pods to its node by a required
// matchFields term on metadata.name. Such a pod on an ordinary node is not offloaded.
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
		if requiredAffinityCanSelect(spec.Affinity, name) {
			return name, true
		}
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

// requiredAffinityCanSelect reports whether the pod's required node affinity may select the
// virtual node named node: it has no terms, or one of its terms (they are ORed) can.
func requiredAffinityCanSelect(affinity *corev1.Affinity, node string) bool {
	if affinity == nil || affinity.NodeAffinity == nil {
		return true
	}
	required := affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		return true
	}
	return slices.ContainsFunc(required.NodeSelectorTerms, func(term corev1.NodeSelectorTerm) bool {
		return termCanSelect(term, node)
	})
}

// termCanSelect reports whether a node selector term may select the virtual node named node:
// none of its requirements (they are ANDed) on the node's name excludes it. shadowgate knows a
// virtual node's name, which is also its kubernetes.io/hostname label, and none of its other
// labels, so requirements on those do not exclude it. A term without requirements selects no
// node, as the scheduler reads it.
func termCanSelect(term corev1.NodeSelectorTerm, node string) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, r := range term.MatchFields {
		if r.Key == fieldNodeName && nameExcluded(r, node) {
			return false
		}
	}
	for _, r := range term.MatchExpressions {
		if r.Key == LabelHostname && nameExcluded(r, node) {
			return false
		}
	}
	return true
}

// nameExcluded reports whether a requirement on the node's name excludes the node named node.
// Gt and Lt compare integers, which a node's name seldom is: they are left to the scheduler.
func nameExcluded(r corev1.NodeSelectorRequirement, node string) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return !slices.Contains(r.Values, node)
	case corev1.NodeSelectorOpNotIn:
		return slices.Contains(r.Values, node)
	case corev1.NodeSelectorOpDoesNotExist:
		return true
	}
	return false
}
