package inject

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Labels and annotations on every shadow object (DESIGN.md "Shadow objects"). The node
// ConfigMap's role label and key are validate.LabelShadowRole and validate.ComputeNodeKey.
const (
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	ManagedBy           = "shadowgate"
	LabelPodUID         = "interlink.eu/pod-uid"
	AnnotationShadowFor = "interlink.eu/shadow-for"

	// LabelShadow selects one shadow's pods, for its Deployment and Service.
	LabelShadow = "interlink.eu/shadow"
)

const (
	maxLabel = 63
	// nodeSuffix names the node ConfigMap after its shadow. The shadow name leaves room for
	// it, so the ConfigMap is always exactly <shadow>-node, the name the virtual kubelet writes.
	nodeSuffix   = "-node"
	maxShadow    = maxLabel - len(nodeSuffix)
	hashLen      = 10
	shadowPrefix = "shadow-"
	nsSuffix     = "-shadow"
)

// ShadowName is the name of a pod's shadow Deployment and Service: shadow-<pod>-<ns>, a
// DNS-1035 label short enough that <shadow>-node is a label too. A name that had to be cut or
// changed (a pod name may hold dots, a Service name may not) ends in a hash of the pod's
// namespace and name, so two pods never share a shadow.
func ShadowName(podName, namespace string) string {
	return label(shadowPrefix+podName+"-"+namespace, namespace+"/"+podName, maxShadow)
}

// ShadowNamespace is where a pod's shadow lives: the pod's own namespace with
// interlink.eu/shadow-same-ns, else <ns>-shadow, cut to a label ending in a hash when too long.
func ShadowNamespace(namespace string, sameNamespace bool) string {
	if sameNamespace {
		return namespace
	}
	return label(namespace+nsSuffix, namespace, maxLabel)
}

// NodeConfigMapName is the ConfigMap that tells a shadow its compute node.
func NodeConfigMapName(shadowName string) string { return shadowName + nodeSuffix }

// label returns name when it is already a label of at most max characters; otherwise the
// name with every character a label cannot hold replaced by '-', cut, and ended in a hash of
// identity.
func label(name, identity string, max int) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	if clean == name && len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(identity))
	hash := hex.EncodeToString(sum[:])[:hashLen]
	cut := strings.TrimRight(clean[:min(len(clean), max-hashLen-1)], "-")
	return cut + "-" + hash
}
