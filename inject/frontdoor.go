package inject

import (
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// AnnotationClusterIssuer asks cert-manager's ingress-shim for a Certificate of an Ingress's
// TLS hosts from the named ClusterIssuer, owned by the Ingress, into the Secret its TLS names.
const AnnotationClusterIssuer = "cert-manager.io/cluster-issuer"

// tlsSuffix names the Secret cert-manager writes a shadow's certificate to: <shadow>-tls.
const tlsSuffix = "-tls"

// maxPortDigits is the most digits a port has.
const maxPortDigits = 5

// hostHashLen is how many hex digits of the hash end a front door's host: 80 bits, as hosts
// are public and one pod's differs from another's, whose names a tenant chooses, by its hash
// alone.
const hostHashLen = 20

// FrontDoorHost is the host at which port of the pod namespace/podName with uid is published
// under domain (policy.Network.Domain): one DNS label, <pod>-<ns>-<port>-<hash>, then the
// domain. The label is cut so that it is at most 63 characters whatever the port, and ends in
// hostHashLen hex digits of the hash of <ns>/<pod>/<uid>: a host is one label under a wildcard
// certificate, and joined names alone collide (pod a-b in c, pod a in b-c), so only the hash
// keeps two pods' hosts apart. With the pod's UID in the hash no host can be known before its
// pod exists, nor by a tenant who cannot read the pod, so none can be claimed in advance. The
// port, before the hash, keeps one pod's ports apart.
func FrontDoorHost(podName, namespace string, uid types.UID, port int32, domain string) string {
	cut := cleanCut(podName+"-"+namespace, maxLabel-1-maxPortDigits-1-hostHashLen)
	return cut + "-" + strconv.Itoa(int(port)) + "-" + hashOf(namespace+"/"+podName+"/"+string(uid), hostHashLen) + "." + domain
}

// FrontDoorURL is the address a browser opens for host: https unless plain HTTP is allowed.
func FrontDoorURL(network *policy.Network, host string) string {
	if network.IngressTLS {
		return "https://" + host + "/"
	}
	return "http://" + host + "/"
}

// RouteName is the name of the HTTPRoute publishing port of the shadow shadowName:
// <shadow>-<port>. An HTTPRoute's hostnames apply to all its rules, so each port, with its own
// host, has its own route.
func RouteName(shadowName string, port int32) string {
	return shadowName + "-" + strconv.Itoa(int(port))
}

// IsRouteName says whether name is RouteName(shadowName, p) for some port p.
func IsRouteName(shadowName, name string) bool {
	digits, ok := strings.CutPrefix(name, shadowName+"-")
	if !ok || digits == "" || len(digits) > maxPortDigits || digits[0] == '0' {
		return false
	}
	p, err := strconv.Atoi(digits)
	return err == nil && p >= 1 && p <= 65535
}

// publishedPorts are the forwarded ports the front door publishes: those the pod lists in
// interlink.eu/front-door-ports (validate.Pod has checked that it forwards each), else all;
// none without a front door.
func (b *builder) publishedPorts() []shadowPort {
	if !b.o.Node.Network.HasFrontDoor() {
		return nil
	}
	if b.o.FrontDoorPorts == nil {
		return b.ports
	}
	var out []shadowPort
	for _, p := range b.ports {
		if slices.Contains(b.o.FrontDoorPorts, p.Port) {
			out = append(out, p)
		}
	}
	return out
}

// frontDoorHosts are the hosts of ports, in their order.
func (b *builder) frontDoorHosts(ports []shadowPort) []string {
	hosts := make([]string, 0, len(ports))
	for _, p := range ports {
		hosts = append(hosts, FrontDoorHost(b.pod.Name, b.pod.Namespace, b.pod.UID, p.Port, b.o.Node.Network.Domain()))
	}
	return hosts
}

// ingress publishes each published port (publishedPorts) at its host through the admin's IngressClass: one
// rule per port to the shadow's Service, and, with IngressTLS, TLS for all the hosts with the
// wildcard certificate FrontDoor.TLSSecret (copied in with the credentials) or a certificate
// cert-manager issues from IngressClusterIssuer into <shadow>-tls. Nil without a front door of
// kind Ingress or without a port.
func (b *builder) ingress() *networkingv1.Ingress {
	network := &b.o.Node.Network
	ports := b.publishedPorts()
	if network.FrontDoor.Kind != policy.FrontDoorIngress || len(ports) == 0 {
		return nil
	}
	hosts := b.frontDoorHosts(ports)
	prefix := networkingv1.PathTypePrefix
	var rules []networkingv1.IngressRule
	for i, p := range ports {
		rules = append(rules, networkingv1.IngressRule{
			Host: hosts[i],
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: b.name, Port: networkingv1.ServiceBackendPort{Number: p.Port},
				}},
			}}}},
		})
	}
	ing := &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: b.meta(b.name),
		Spec:       networkingv1.IngressSpec{Rules: rules},
	}
	if class := network.FrontDoor.IngressClassName; class != "" {
		ing.Spec.IngressClassName = ptr.To(class)
	}
	if network.IngressTLS {
		secret := network.FrontDoor.TLSSecret
		if network.IngressClusterIssuer != "" {
			secret = b.name + tlsSuffix
			ing.Annotations[AnnotationClusterIssuer] = network.IngressClusterIssuer
		}
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: hosts, SecretName: secret}}
	}
	return ing
}

// httpRoutes publish each published port (publishedPorts) at its host through the admin's Gateway: one
// HTTPRoute per port (RouteName), attached to the Gateway's listener FrontDoor.Gateway names,
// which terminates TLS with the Gateway's certificate. Nil without a front door of kind
// HTTPRoute.
func (b *builder) httpRoutes() []*gatewayv1.HTTPRoute {
	network := &b.o.Node.Network
	ports := b.publishedPorts()
	if network.FrontDoor.Kind != policy.FrontDoorHTTPRoute || len(ports) == 0 {
		return nil
	}
	gw := network.FrontDoor.Gateway
	parent := gatewayv1.ParentReference{
		Group:     ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
		Kind:      ptr.To(gatewayv1.Kind("Gateway")),
		Name:      gatewayv1.ObjectName(gw.Name),
		Namespace: ptr.To(gatewayv1.Namespace(gw.Namespace)),
	}
	if gw.SectionName != "" {
		parent.SectionName = ptr.To(gatewayv1.SectionName(gw.SectionName))
	}
	hosts := b.frontDoorHosts(ports)
	routes := make([]*gatewayv1.HTTPRoute, 0, len(ports))
	for i, p := range ports {
		routes = append(routes, &gatewayv1.HTTPRoute{
			TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "HTTPRoute"},
			ObjectMeta: b.meta(RouteName(b.name, p.Port)),
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
				Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(hosts[i])},
				Rules: []gatewayv1.HTTPRouteRule{{
					Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
						Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/"),
					}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
						Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")),
						Name: gatewayv1.ObjectName(b.name), Port: ptr.To(gatewayv1.PortNumber(p.Port)),
					}}}},
				}},
			},
		})
	}
	return routes
}
