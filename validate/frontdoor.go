package validate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// MaxFrontDoorDomain is the longest domain WildcardDNS may name: a host is one label of up to
// 63 characters, a dot and the domain, and a DNS name is at most 253 characters.
const MaxFrontDoorDomain = validation.DNS1123SubdomainMaxLength - validation.DNS1123LabelMaxLength - 1

// validateFrontDoor judges the keys that publish an SSH shadow's ports outside the cluster
// (docs/policy.md "The front door"): WildcardDNS a domain the hosts can be made in, TLS on
// with one source of certificates unless plain HTTP is asked for in so many words, and the
// Ingress or Gateway named validly for the kind chosen. A node without WildcardDNS may set
// none of the others but IngressTLS, which is on by default.
func validateFrontDoor(n *policy.Network, p *field.Path) field.ErrorList {
	fd := &n.FrontDoor
	fp := p.Child("FrontDoor")
	if n.WildcardDNS == "" {
		var errs field.ErrorList
		if n.IngressClusterIssuer != "" {
			errs = append(errs, field.Invalid(p.Child("IngressClusterIssuer"), n.IngressClusterIssuer,
				"issues the front door's certificates, but the node has no front door: set WildcardDNS to the domain whose hosts publish the shadows' ports, or remove IngressClusterIssuer"))
		}
		if *fd != policy.Defaults().Network.FrontDoor {
			errs = append(errs, field.Invalid(fp, "a mapping",
				"configures the front door, but the node has none: set WildcardDNS to the domain whose hosts publish the shadows' ports, or remove FrontDoor"))
		}
		return errs
	}
	errs := validateWildcardDNS(n.WildcardDNS, p.Child("WildcardDNS"))
	errs = append(errs, objectName(p.Child("IngressClusterIssuer"), n.IngressClusterIssuer, "cert-manager ClusterIssuer")...)
	errs = append(errs, objectName(fp.Child("TLSSecret"), fd.TLSSecret, "Secret")...)
	errs = append(errs, objectName(fp.Child("IngressClassName"), fd.IngressClassName, "IngressClass")...)
	if !n.IngressTLS {
		if !fd.AllowPlainHTTP {
			errs = append(errs, field.Forbidden(p.Child("IngressTLS"),
				"with IngressTLS: false the front door would publish the pods' ports over plain HTTP, where anyone on the path reads and changes the traffic: "+
					"set IngressTLS: true with IngressClusterIssuer or FrontDoor.TLSSecret, or, to accept that, FrontDoor.AllowPlainHTTP: true"))
		}
		if n.IngressClusterIssuer != "" || fd.TLSSecret != "" {
			errs = append(errs, field.Invalid(p.Child("IngressTLS"), false,
				"turns TLS off, yet IngressClusterIssuer or FrontDoor.TLSSecret names a certificate: set IngressTLS: true, or remove the certificate"))
		}
	} else if fd.AllowPlainHTTP {
		errs = append(errs, field.Invalid(fp.Child("AllowPlainHTTP"), true,
			"has no effect while IngressTLS is true, the default; remove it, or set IngressTLS: false to publish over plain HTTP"))
	}
	errs = append(errs, namespaceName(fp.Child("ControllerNamespace"), fd.ControllerNamespace)...)
	switch fd.Kind {
	case policy.FrontDoorIngress:
		if fd.IngressClassName == "" {
			errs = append(errs, field.Required(fp.Child("IngressClassName"),
				"without a class the Ingress is served by the cluster's default IngressClass, or by none, and not necessarily by the controller in ControllerNamespace: name the IngressClass of the controller that serves WildcardDNS"))
		}
		if fd.ControllerNamespace == "" {
			errs = append(errs, field.Required(fp.Child("ControllerNamespace"),
				"the shadow's NetworkPolicy admits only the pod's own namespace: name the namespace the ingress controller runs in (such as ingress-nginx), so its pods reach the shadow"))
		}
		if fd.Gateway != (policy.GatewayRef{}) {
			errs = append(errs, field.Forbidden(fp.Child("Gateway"), "names a Gateway, which an Ingress does not use: set FrontDoor.Kind: HTTPRoute, or remove Gateway"))
		}
		if n.IngressTLS && n.IngressClusterIssuer != "" && fd.TLSSecret != "" {
			errs = append(errs, field.Invalid(fp.Child("TLSSecret"), fd.TLSSecret,
				"and IngressClusterIssuer both name where the certificate comes from: keep one"))
		}
		if n.IngressTLS && n.IngressClusterIssuer == "" && fd.TLSSecret == "" {
			errs = append(errs, field.Required(p.Child("IngressClusterIssuer"),
				"the front door serves HTTPS and needs a certificate: name the cert-manager ClusterIssuer that issues one per shadow (IngressClusterIssuer), "+
					"or a wildcard certificate for *."+n.Domain()+" in a kubernetes.io/tls Secret of shadowgate's namespace (FrontDoor.TLSSecret)"))
		}
	case policy.FrontDoorHTTPRoute:
		errs = append(errs, validateGateway(n, p)...)
	default:
		errs = append(errs, field.NotSupported(fp.Child("Kind"), fd.Kind, []string{policy.FrontDoorIngress, policy.FrontDoorHTTPRoute}))
	}
	return errs
}

// frontDoorWithoutPorts refuses the front door's keys on a node whose shadows forward no port
// for it to publish, one without EnableTunnel, rather than accept them to no effect; and, on a
// wstunnel node, FrontDoor, shadowgate's own key, as interLink's virtual kubelet publishes its
// wstunnel from WildcardDNS, IngressTLS and IngressClusterIssuer alone.
func frontDoorWithoutPorts(n *policy.Network, p *field.Path) field.ErrorList {
	fdSet := n.FrontDoor != policy.Defaults().Network.FrontDoor
	if n.EnableTunnel {
		if !fdSet {
			return nil
		}
		return field.ErrorList{field.Invalid(p.Child("FrontDoor"), "a mapping",
			"configures shadowgate's front door of SSH shadows, but this node's ShadowMode is wstunnel, whose tunnel interLink's virtual kubelet publishes from WildcardDNS itself: "+
				"set ShadowMode: ssh, or remove FrontDoor")}
	}
	const why = ", but EnableTunnel is false, so the node's shadows forward no port for a front door to publish: set EnableTunnel: true, or remove "
	var errs field.ErrorList
	if n.WildcardDNS != "" {
		errs = append(errs, field.Invalid(p.Child("WildcardDNS"), n.WildcardDNS, "names the domain the front door publishes ports in"+why+"WildcardDNS"))
	}
	if n.IngressClusterIssuer != "" {
		errs = append(errs, field.Invalid(p.Child("IngressClusterIssuer"), n.IngressClusterIssuer, "issues the front door's certificates"+why+"IngressClusterIssuer"))
	}
	if fdSet {
		errs = append(errs, field.Invalid(p.Child("FrontDoor"), "a mapping", "configures the front door"+why+"FrontDoor"))
	}
	if !n.IngressTLS {
		errs = append(errs, field.Invalid(p.Child("IngressTLS"), false, "turns the front door's TLS off"+why+"IngressTLS"))
	}
	return errs
}

// validateWildcardDNS refuses a WildcardDNS in which no host can be made: it must be a
// lower-case DNS domain of at least two labels, not an address, written bare or as *.<domain>,
// short enough for a label in front of it.
func validateWildcardDNS(wildcard string, p *field.Path) field.ErrorList {
	domain := strings.TrimPrefix(wildcard, "*.")
	const what = "must be the DNS domain whose hosts reach the cluster's ingress, such as apps.example.org or *.apps.example.org"
	if msgs := validation.IsDNS1123Subdomain(domain); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, wildcard, what+": "+strings.Join(msgs, "; "))}
	}
	labels := strings.Split(domain, ".")
	for _, l := range labels {
		if msgs := validation.IsDNS1123Label(l); len(msgs) > 0 {
			return field.ErrorList{field.Invalid(p, wildcard, what+": label "+l+" "+strings.Join(msgs, "; "))}
		}
	}
	switch last := labels[len(labels)-1]; {
	case len(labels) < 2:
		return field.ErrorList{field.Invalid(p, wildcard, what+": a single label is a top-level domain, for which no certificate is issued")}
	case strings.Trim(last, "0123456789") == "":
		return field.ErrorList{field.Invalid(p, wildcard, what+": it ends in a number, as an IP address does; name a DNS domain")}
	case len(domain) > MaxFrontDoorDomain:
		return field.ErrorList{field.Invalid(p, wildcard, fmt.Sprintf(
			"is %d characters; a host under it is a label of up to 63 characters and the domain, at most 253 in all, so the domain may have at most %d: choose a shorter one",
			len(domain), MaxFrontDoorDomain))}
	}
	return nil
}

// validateGateway judges an HTTPRoute front door: it attaches to the named Gateway, whose
// listener terminates TLS with the Gateway's own certificate, so the certificate keys do not
// apply, and with TLS the listener must be named, or the routes would attach to every
// listener of the Gateway, its plain HTTP one too.
func validateGateway(n *policy.Network, p *field.Path) field.ErrorList {
	fd := &n.FrontDoor
	fp := p.Child("FrontDoor")
	gp := fp.Child("Gateway")
	var errs field.ErrorList
	if fd.Gateway.Name == "" {
		errs = append(errs, field.Required(gp.Child("Name"), "an HTTPRoute attaches to a Gateway: name the one that serves *."+n.Domain()))
	}
	errs = append(errs, objectName(gp.Child("Name"), fd.Gateway.Name, "Gateway")...)
	if fd.Gateway.Namespace == "" {
		errs = append(errs, field.Required(gp.Child("Namespace"), "the Gateway's namespace: the routes live in shadow namespaces, never the Gateway's own"))
	}
	errs = append(errs, namespaceName(gp.Child("Namespace"), fd.Gateway.Namespace)...)
	if n.IngressTLS && fd.Gateway.SectionName == "" {
		errs = append(errs, field.Required(gp.Child("SectionName"), fmt.Sprintf(
			"name the Gateway's HTTPS listener for *.%s: without it the routes attach to every listener of the Gateway, a plain HTTP one too", n.Domain())))
	}
	errs = append(errs, objectName(gp.Child("SectionName"), fd.Gateway.SectionName, "Gateway listener")...)
	const atGateway = "an HTTPRoute's TLS is the Gateway listener's, with the Gateway's certificate: "
	if n.IngressClusterIssuer != "" {
		errs = append(errs, field.Forbidden(p.Child("IngressClusterIssuer"), atGateway+
			"remove IngressClusterIssuer and have the listener's certificate issued there (cert-manager's annotation on the Gateway), or set FrontDoor.Kind: Ingress"))
	}
	if fd.TLSSecret != "" {
		errs = append(errs, field.Forbidden(fp.Child("TLSSecret"), atGateway+
			"remove TLSSecret and name the Secret in the listener's certificateRefs, or set FrontDoor.Kind: Ingress"))
	}
	if fd.IngressClassName != "" {
		errs = append(errs, field.Forbidden(fp.Child("IngressClassName"), "names an IngressClass, which an HTTPRoute does not use: remove it, or set FrontDoor.Kind: Ingress"))
	}
	return errs
}

// namespaceName refuses a set value that is no namespace name.
func namespaceName(p *field.Path, ns string) field.ErrorList {
	var errs field.ErrorList
	if ns == "" {
		return nil
	}
	for _, msg := range validation.IsDNS1123Label(ns) {
		errs = append(errs, field.Invalid(p, ns, "must be a namespace name: "+msg))
	}
	return errs
}

// IsFrontDoorDomain says whether domain passes the check of a virtual node's WildcardDNS: a
// DNS domain of two labels or more, not ending in a number, short enough for a host under it.
func IsFrontDoorDomain(domain string) bool {
	return len(validateWildcardDNS(domain, field.NewPath("WildcardDNS"))) == 0
}
