package validate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Flags of serve, check, render and policy check that set CredentialRules.
const (
	// CredentialReplicationFlag says whether shadowgate may copy credentials into shadow
	// namespaces: false where its ServiceAccount is granted no Secret rights (the chart's
	// credentialReplication: false, kustomize's no-credential-replication component).
	CredentialReplicationFlag = "credential-replication"
	// CredentialsInPodNamespacesFlag lets a pod with interlink.eu/shadow-same-ns have the
	// site's credentials copied into its own namespace.
	CredentialsInPodNamespacesFlag = "credentials-in-pod-namespaces"
)

// CredentialRules are what shadowgate may do with the site's credentials, set by the flags
// above. The zero value is their defaults, the guide's behaviour: replicate, also into a pod's
// own namespace. A valid policy, pod or template that needs more than the rules allow is
// refused, naming the flag.
type CredentialRules struct {
	// WithoutReplication (--credential-replication=false) is set when shadowgate may not
	// write Secrets: a virtual node whose policy asks for ReplicateCredentials is refused once,
	// when the policy is applied, rather than every pod of that node when its copy is
	// forbidden.
	WithoutReplication bool
	// WithoutCopiesInPodNamespaces (--credentials-in-pod-namespaces=false) is set when no pod
	// may have the site's Secret copied into its own namespace (secretInPodNamespace).
	WithoutCopiesInPodNamespaces bool
}

// validateReplication refuses, with WithoutReplication, a virtual node whose policy asks for
// what this shadowgate may not do: copy its credentials into shadow namespaces.
func (r CredentialRules) validateReplication(network *policy.Network, p *field.Path) field.ErrorList {
	if !r.WithoutReplication || !replicates(network) {
		return nil
	}
	return field.ErrorList{field.Invalid(p.Child("SSH", "ReplicateCredentials"), true,
		"shadowgate runs with --"+CredentialReplicationFlag+"=false, so it may not write Secrets and cannot copy this node's credentials "+
			"into shadow namespaces: set ReplicateCredentials: false and provide the credentials in each shadow namespace yourself, "+
			"or install shadowgate with credential replication (chart value credentialReplication: true, or kustomize without the no-credential-replication component)")}
}

// secretInPodNamespace refuses, with WithoutCopiesInPodNamespaces, a pod (or a template's pods)
// in namespace that asks for its shadow in its own namespace (interlink.eu/shadow-same-ns) on a
// node that replicates a Secret: there everyone who can create pods or read Secrets, the pod's
// author first, could read the site's key or keytab. The shadow's own namespace, <ns>-shadow,
// grants pod authors nothing. The pod is refused whether or not it has a port that needs a
// shadow: the annotation asks for the copy, and the rule stays one a user can read off the
// pod's annotations and the policy. A front door's wildcard certificate (FrontDoor.TLSSecret) is
// never copied there, whatever the flag: its key serves every host under the domain, other
// tenants' pods' among them; a pod that publishes no port (interlink.eu/front-door-ports: none)
// has no Ingress to name it, and no copy.
func (r CredentialRules) secretInPodNamespace(o *Offload, namespace string, at Paths) field.ErrorList {
	if o == nil || !o.SameNamespace || o.PodVPN {
		return nil
	}
	if wildcard := copiedWildcard(o); wildcard != "" {
		return field.ErrorList{field.Forbidden(at.Meta.Child("annotations").Key(AnnotationShadowSameNS), fmt.Sprintf(
			"the shadow would live in namespace %s and the front door's wildcard certificate (Secret %s of virtual node %s) would be copied there, "+
				"where its key, which serves every host under the domain, other tenants' pods' among them, could be read: remove the annotation, and the shadow lives in %s-shadow",
			namespace, wildcard, o.NodeName, namespace))}
	}
	if r.WithoutCopiesInPodNamespaces {
		if secret := copiedSecret(&o.Node.Network); secret != "" {
			return secretCopyForbidden(o.NodeName, secret, namespace, at)
		}
	}
	return nil
}

// replicates says whether shadows on this network have its credentials copied into their
// namespace.
func replicates(network *policy.Network) bool {
	return network.SSHShadow() && network.SSH.ReplicateCredentials
}

// copiedSecret is the login's key or keytab a shadow on this network has copied into its
// namespace, or "".
func copiedSecret(network *policy.Network) string {
	if !replicates(network) {
		return ""
	}
	return network.SSH.CredentialSecret()
}

// copiedWildcard is the front door's wildcard certificate the shadow of o has copied into its
// namespace, or "": none on a network without a front door or that does not replicate, nor for
// a pod whose interlink.eu/front-door-ports publishes no port.
func copiedWildcard(o *Offload) string {
	network := &o.Node.Network
	if !replicates(network) || !network.HasFrontDoor() || (o.FrontDoorPorts != nil && len(o.FrontDoorPorts) == 0) {
		return ""
	}
	return network.FrontDoor.TLSSecret
}

func secretCopyForbidden(node, secret, namespace string, at Paths) field.ErrorList {
	return field.ErrorList{field.Forbidden(at.Meta.Child("annotations").Key(AnnotationShadowSameNS), fmt.Sprintf(
		"the shadow would live in namespace %s and the site's credentials (Secret %s of virtual node %s) would be copied there, "+
			"where everyone who can create pods or read Secrets could read them: remove the annotation, and the shadow lives in %s-shadow; "+
			"this shadowgate runs with --%s=false",
		namespace, secret, node, namespace, CredentialsInPodNamespacesFlag))}
}
