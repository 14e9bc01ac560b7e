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
	// LabelShadowNamespaceFor marks a namespace shadowgate created (or an admin handed over)
	// for the shadows of one pod namespace, its value. shadowgate writes shadows only into a
	// namespace marked for the pod's namespace: any other namespace of that name may be a
	// tenant's, made to receive another namespace's shadows or credential copies. The shipped
	// ValidatingAdmissionPolicy lets only shadowgate and the cluster admins set, change or
	// remove it (docs/security.md "Shadow namespaces").
	LabelShadowNamespaceFor = "interlink.eu/shadow-namespace-for"
	// LabelCreatedByShadowgate, valued "true", is set when shadowgate creates a shadow
	// namespace or a credential copy, and never later: what carries it shadowgate may delete
	// once no shadow uses it (webhook's Collector), what was handed over or adopted it never
	// deletes. The shipped least-privilege policy refuses it on any later write.
	LabelCreatedByShadowgate = "interlink.eu/created-by-shadowgate"

	// labelShadow selects one shadow's pods, for its Deployment and Service.
	labelShadow = "interlink.eu/shadow"
	// labelComponent is on the shadow pod, valued the shadow's name: the virtual kubelet
	// finds the shadow pod by it (to report its IP as the offloaded pod's), as it finds the
	// shadows it renders itself.
	labelComponent = "app.kubernetes.io/component"
)

const (
	maxLabel = 63
	// nodeSuffix names the node ConfigMap after its shadow, as the virtual kubelet does.
	nodeSuffix = "-node"
	// maxShadow leaves room for nodeSuffix, so <shadow>-node is always a label too.
	maxShadow    = maxLabel - len(nodeSuffix)
	hashLen      = 10
	shadowPrefix = "shadow-"
	nsSuffix     = "-shadow"
)

// ShadowName is the name of a pod's shadow Deployment and Service, and ShadowNamespace where
// they live. They are the virtual kubelet's own names (interLink's
// pkg/virtualkubelet/shadow.go) whenever the VK uses them unchanged:
//
//	default:                      <pod>-<ns>         in <ns>-shadow
//	interlink.eu/shadow-same-ns:  shadow-<pod>-<ns>  in <ns>
//
// so a VK that publishes the compute node writes the ConfigMap the shadow mounts, and a site
// that moves from VK-rendered shadows keeps its Service names. The VK uses them unchanged when
// the pod name and namespace pass its sanitizer untouched (lower-case letters, digits and
// single hyphens: no dot, no "--") and the first label of its Ingress host, <name>-<shadow
// namespace>, fits in 63 characters, which comes to len(pod) + 2*len(ns) <= 54 in both modes.
// shadowgate asks two more things of such a name: a Service name must start with a letter (a
// DNS-1035 label; the VK's name for a pod called 0-web fails as a Service), and <name>-node
// must be a label too (same-ns only; the VK's can reach 66 characters).
//
// Every other name is shadowgate's own, and differs from the VK's (docs/virtual-kubelet-names.md
// says how, pod by pod): shadow-<cut>-<hash>, where cut is <pod>-<ns> (same-ns:
// shadow-<pod>-<ns>, not prefixed twice) with every character a label cannot hold made '-', cut
// so the whole is at most 58 characters and <name>-node a label, and hash is 10 hex digits of
// the SHA-256 of <ns>/<pod>, so two pods never share a shadow however alike their names (the
// VK's sanitizing makes jupyter.lab and jupyter-lab one name, and a--b and a-b). A name either
// is the VK's or ends in a hash: nothing in between.
func ShadowName(podName, namespace string, sameNamespace bool) string {
	name := podName + "-" + namespace
	if sameNamespace {
		name = shadowPrefix + name
	}
	if vkUnchanged(podName) && vkUnchanged(namespace) && startsWithLetter(name) && len(name) <= maxShadow &&
		len(name)+1+len(ShadowNamespace(namespace, sameNamespace)) <= maxLabel {
		return name
	}
	if !strings.HasPrefix(name, shadowPrefix) {
		name = shadowPrefix + name
	}
	return cleanCut(name, maxShadow-1-hashLen) + "-" + hash(namespace+"/"+podName)
}

// ShadowNamespace is where a pod's shadow lives: the pod's own namespace with
// interlink.eu/shadow-same-ns, else <ns>-shadow, as the VK names it. One namespace per pod
// namespace, whatever the pod: the VK's truncation puts the shadows of one namespace of 25
// characters or more into two namespaces by the length of the pod's name, and, from 31
// characters, into the pod's own namespace (31 characters) or into its first 31 characters,
// which every namespace that starts alike shares. A namespace the VK would change (one holding "--") or whose <ns>-shadow
// passes 63 characters gets <ns, cut>-shadow-<hash of ns>.
func ShadowNamespace(namespace string, sameNamespace bool) string {
	if sameNamespace {
		return namespace
	}
	if name := namespace + nsSuffix; vkUnchanged(namespace) && len(name) <= maxLabel {
		return name
	}
	return cleanCut(namespace, maxLabel-len(nsSuffix)-1-hashLen) + nsSuffix + "-" + hash(namespace)
}

// NodeConfigMapName is the ConfigMap that tells a shadow its compute node: <shadow>-node, the
// name the VK writes the compute node to.
func NodeConfigMapName(shadowName string) string { return shadowName + nodeSuffix }

// vkUnchanged reports whether the VK's sanitizer leaves s as it is: s is lower-case letters,
// digits and hyphens, neither starts nor ends with a hyphen, holds no "--", and is at most 63
// characters.
func vkUnchanged(s string) bool {
	if s == "" || len(s) > maxLabel || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func startsWithLetter(s string) bool { return s != "" && s[0] >= 'a' && s[0] <= 'z' }

// cleanCut is name in lower case with every character a label cannot hold replaced by '-',
// cut to at most max characters, without a hyphen at either end.
func cleanCut(name string, max int) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	return strings.Trim(clean[:min(len(clean), max)], "-")
}

// hash ends every name shadowgate shortens or changes: hashLen hex digits of the SHA-256 of
// what the name stands for, so two names that differ only in what was cut or changed differ.
func hash(identity string) string {
	return hashOf(identity, hashLen)
}

// hashOf is n hex digits of the SHA-256 of identity.
func hashOf(identity string, n int) string {
	sum := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(sum[:])[:n]
}
