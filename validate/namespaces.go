package validate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// validateNamespaceBinding judges a virtual node's AllowedNamespaces and
// AllowedNamespaceSelector: namespace names, and a selector the API server's own rules accept.
// An empty selector is refused: it matches every namespace, which is what leaving both unset
// says, and an admin who writes one most likely meant to fill it in.
func validateNamespaceBinding(vn *policy.VirtualNode, nodePath *field.Path) field.ErrorList {
	var errs field.ErrorList
	listPath := nodePath.Child("AllowedNamespaces")
	seen := map[string]int{}
	for i, ns := range vn.AllowedNamespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(listPath.Index(i), ns, "must be a namespace name: "+msg))
		}
		if first, dup := seen[ns]; dup {
			errs = append(errs, field.Invalid(listPath.Index(i), ns, fmt.Sprintf("is listed already at %s; remove one", listPath.Index(first))))
			continue
		}
		seen[ns] = i
	}
	sel := vn.AllowedNamespaceSelector
	if sel == nil {
		return errs
	}
	selPath := nodePath.Child("AllowedNamespaceSelector")
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(selPath, "{}",
			"an empty selector matches every namespace; give matchLabels or matchExpressions, or remove it"))
	}
	return append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
}

// namespaceAllowed reports whether pods of namespace ns, whose labels are nsLabels, may use the
// virtual node: the node is not bound, or ns is listed, or its labels match the selector. The
// API server gives every namespace the label kubernetes.io/metadata.name with its name, so it
// is matched whether or not nsLabels carries it (the CLI knows no labels).
func namespaceAllowed(vn *policy.VirtualNode, ns string, nsLabels map[string]string) bool {
	if !vn.NamespaceBound() {
		return true
	}
	for _, allowed := range vn.AllowedNamespaces {
		if allowed == ns {
			return true
		}
	}
	if vn.AllowedNamespaceSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(vn.AllowedNamespaceSelector)
	if err != nil {
		return false // validateNamespaceBinding refused such a policy; fail closed all the same
	}
	set := labels.Set{corev1.LabelMetadataName: ns}
	for k, v := range nsLabels {
		if k != corev1.LabelMetadataName {
			set[k] = v
		}
	}
	return sel.Matches(set)
}

// namespaceRefusal refuses a pod of a namespace the virtual node is not bound to, at the field
// that places the pod there, naming the node, the namespace and the rule, and what to do.
func namespaceRefusal(o *Offload, spec *corev1.PodSpec, at Paths) *field.Error {
	vn := &o.Node
	var rules, remedies []string
	if vn.AllowedNamespaces != nil {
		rules = append(rules, fmt.Sprintf("the namespaces listed in AllowedNamespaces [%s]", strings.Join(vn.AllowedNamespaces, ", ")))
		remedies = append(remedies, fmt.Sprintf("to add %s to virtualNodes[%s].AllowedNamespaces", o.Namespace, o.NodeName))
	}
	if vn.AllowedNamespaceSelector != nil {
		rules = append(rules, fmt.Sprintf("the namespaces whose labels match AllowedNamespaceSelector %q", metav1.FormatLabelSelector(vn.AllowedNamespaceSelector)))
		remedies = append(remedies, fmt.Sprintf("to label namespace %s to match it", o.Namespace))
	}
	return field.Forbidden(placementPath(spec, at.Spec), fmt.Sprintf(
		"namespace %s may not use virtual node %s: shadowgate's policy binds it to %s, and every pod on it runs its job as the node's one site account, shared by those namespaces; ask the cluster admin %s, or place the pod on a virtual node your namespace may use",
		o.Namespace, o.NodeName, strings.Join(rules, " or "), strings.Join(remedies, " or ")))
}

// placementPath is the field VirtualNodeFor placed the pod by: spec.nodeName, the hostname node
// selector, else the toleration that lets it onto the policy's only virtual node.
func placementPath(spec *corev1.PodSpec, specPath *field.Path) *field.Path {
	if spec.NodeName != "" {
		return specPath.Child("nodeName")
	}
	if _, set := spec.NodeSelector[LabelHostname]; set {
		return specPath.Child("nodeSelector").Key(LabelHostname)
	}
	return specPath.Child("tolerations")
}

// PolicyWarnings are what an admin is told about a valid policy at `shadowgate policy check`,
// at apply of its ConfigMap and when serve loads it: the virtual kubelet's keys it ignores,
// and each virtual node any namespace may use, whose pods all run as its one site account.
// docPath prefixes the paths, as for Policy.
func PolicyWarnings(p *policy.Policy, docPath *field.Path) []string {
	warnings := append([]string{}, p.Ignored...)
	nodesPath := policyChild(docPath, "virtualNodes")
	for _, name := range p.NodeNames() {
		vn := p.VirtualNodes[name]
		if vn.NamespaceBound() {
			continue
		}
		account := "its one site account"
		if user := vn.Network.SSH.User; user != "" {
			account = fmt.Sprintf("its one site account (User: %s)", user)
		}
		warnings = append(warnings, fmt.Sprintf(
			"%s: any namespace may use virtual node %s, and every pod on it runs its job as %s, so a pod's job can reach the others' jobs and forwards; bind the node to its tenant's namespaces with AllowedNamespaces or AllowedNamespaceSelector, and give each tenant that needs isolation a virtual node and User of its own (docs/security.md)",
			nodesPath.Key(name), name, account))
	}
	return warnings
}
