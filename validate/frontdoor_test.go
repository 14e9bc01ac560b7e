package validate_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

// sshFrontDoor is an SSH node with the front-door lines added to its Network block.
func sshFrontDoor(lines string) string {
	return node("EnableTunnel: true\nShadowMode: ssh\nSSH:\n  LoginHost: login.hpc.example.org\n  User: alice\n  KeySecret: hpc-ssh-key\n" + lines)
}

var network = field.NewPath("virtualNodes").Key("cern-vk").Child("Network")

func TestFrontDoorPolicy(t *testing.T) {
	frontDoor := network.Child("FrontDoor")
	gateway := frontDoor.Child("Gateway")
	for name, c := range map[string]struct {
		lines string
		want  []vt.Err
	}{
		"an Ingress front door with a cert-manager ClusterIssuer is valid": {
			lines: "WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor:\n  IngressClassName: nginx\n  ControllerNamespace: ingress-nginx\n"},
		"the VK's *.domain form of WildcardDNS is valid": {
			lines: "WildcardDNS: '*.apps.example.org'\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n"},
		"an Ingress front door without the ingress controller's namespace is refused": {
			lines: "WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeRequired, Field: frontDoor.Child("ControllerNamespace").String(), Value: ""}}},
		"an Ingress front door with an existing wildcard Secret is valid": {
			lines: "WildcardDNS: apps.example.org\nFrontDoor:\n  TLSSecret: apps-wildcard-tls\n  IngressClassName: nginx\n  ControllerNamespace: ingress-nginx\n"},
		"an HTTPRoute front door on a named HTTPS listener is valid": {
			lines: "WildcardDNS: apps.example.org\nFrontDoor:\n  Kind: httproute\n  Gateway: {Name: public, Namespace: gateways, SectionName: https-apps}\n"},
		"plain HTTP said in so many words is valid": {
			lines: "WildcardDNS: apps.example.org\nIngressTLS: false\nFrontDoor:\n  AllowPlainHTTP: true\n  IngressClassName: nginx\n  ControllerNamespace: ingress-nginx\n"},
		"a node without WildcardDNS has no front door and needs no certificate": {lines: ""},
		"an Ingress front door without an IngressClass is refused, as the default class may be another controller's": {
			lines: "WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeRequired, Field: frontDoor.Child("IngressClassName").String(), Value: ""}}},

		"TLS off without the unsafe opt-in is refused": {
			lines: "WildcardDNS: apps.example.org\nIngressTLS: false\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeForbidden, Field: network.Child("IngressTLS").String(), Value: ""}}},
		"TLS off with a certificate named is refused as a contradiction": {
			lines: "WildcardDNS: apps.example.org\nIngressTLS: false\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx, AllowPlainHTTP: true}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: network.Child("IngressTLS").String(), Value: false}}},
		"the unsafe opt-in with TLS on is refused as having no effect": {
			lines: "WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx, AllowPlainHTTP: true}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: frontDoor.Child("AllowPlainHTTP").String(), Value: true}}},
		"an Ingress with TLS but no certificate is refused": {
			lines: "WildcardDNS: apps.example.org\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeRequired, Field: network.Child("IngressClusterIssuer").String(), Value: ""}}},
		"an Ingress with both an issuer and a Secret is refused": {
			lines: "WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx, TLSSecret: wild}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: frontDoor.Child("TLSSecret").String(), Value: "wild"}}},
		"a WildcardDNS that is a single label is refused": {
			lines: "WildcardDNS: org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: network.Child("WildcardDNS").String(), Value: "org"}}},
		"a WildcardDNS that is an IP address is refused": {
			lines: "WildcardDNS: 10.0.0.1\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: network.Child("WildcardDNS").String(), Value: "10.0.0.1"}}},
		"a WildcardDNS in capitals is refused": {
			lines: "WildcardDNS: Apps.Example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: network.Child("WildcardDNS").String(), Value: "Apps.Example.org"}}},
		"a WildcardDNS with a wildcard deeper than its first label is refused": {
			lines: "WildcardDNS: 'apps.*.example.org'\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: network.Child("WildcardDNS").String(), Value: "apps.*.example.org"}}},
		"a WildcardDNS that leaves no room for a host label is refused": {
			lines: "WildcardDNS: " + strings.Repeat("a.", 95) + "org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: network.Child("WildcardDNS").String(), Value: strings.Repeat("a.", 95) + "org"}}},
		"an issuer name that is no object name is refused": {
			lines: "WildcardDNS: apps.example.org\nIngressClusterIssuer: 'Lets Encrypt'\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: network.Child("IngressClusterIssuer").String(), Value: "Lets Encrypt"}}},
		"a TLS Secret name that is no object name is refused": {
			lines: "WildcardDNS: apps.example.org\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx, TLSSecret: ../tls}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: frontDoor.Child("TLSSecret").String(), Value: "../tls"}}},
		"a front door kind other than Ingress or HTTPRoute is refused": {
			lines: "WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {Kind: Route}\n",
			want:  []vt.Err{{Type: field.ErrorTypeNotSupported, Field: frontDoor.Child("Kind").String(), Value: "Route"}}},
		"an Ingress front door naming a Gateway is refused": {
			lines: "WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx, Gateway: {Name: public}}\n",
			want:  []vt.Err{{Type: field.ErrorTypeForbidden, Field: gateway.String(), Value: ""}}},
		"an HTTPRoute without its Gateway is refused": {
			lines: "WildcardDNS: apps.example.org\nFrontDoor: {Kind: HTTPRoute}\n",
			want: []vt.Err{
				{Type: field.ErrorTypeRequired, Field: gateway.Child("Name").String(), Value: ""},
				{Type: field.ErrorTypeRequired, Field: gateway.Child("Namespace").String(), Value: ""},
				{Type: field.ErrorTypeRequired, Field: gateway.Child("SectionName").String(), Value: ""},
			}},
		"an HTTPRoute with TLS but no listener named is refused": {
			lines: "WildcardDNS: apps.example.org\nFrontDoor: {Kind: HTTPRoute, Gateway: {Name: public, Namespace: gateways}}\n",
			want:  []vt.Err{{Type: field.ErrorTypeRequired, Field: gateway.Child("SectionName").String(), Value: ""}}},
		"an HTTPRoute with a certificate of its own is refused": {
			lines: "WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {Kind: HTTPRoute, TLSSecret: wild, IngressClassName: nginx, Gateway: {Name: public, Namespace: gateways, SectionName: https}}\n",
			want: []vt.Err{
				{Type: field.ErrorTypeForbidden, Field: network.Child("IngressClusterIssuer").String(), Value: ""},
				{Type: field.ErrorTypeForbidden, Field: frontDoor.Child("TLSSecret").String(), Value: ""},
				{Type: field.ErrorTypeForbidden, Field: frontDoor.Child("IngressClassName").String(), Value: ""},
			}},
		"a Gateway namespace that is no namespace name is refused": {
			lines: "WildcardDNS: apps.example.org\nFrontDoor: {Kind: HTTPRoute, Gateway: {Name: public, Namespace: Gate_Ways, SectionName: https}}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: gateway.Child("Namespace").String(), Value: "Gate_Ways"}}},
		"front-door settings without WildcardDNS are refused": {
			lines: "IngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx}\n",
			want: []vt.Err{
				{Type: field.ErrorTypeInvalid, Field: network.Child("IngressClusterIssuer").String(), Value: "letsencrypt"},
				{Type: field.ErrorTypeInvalid, Field: frontDoor.String(), Value: "a mapping"},
			}},
	} {
		t.Run(name, func(t *testing.T) {
			_, errs := validate.ParsePolicy([]byte(sshFrontDoor(indent(c.lines, 0))), validate.CredentialRules{})
			vt.Expect(t, errs, c.want)
		})
	}
}

// The front door's keys on a node whose shadows forward no port (EnableTunnel false) are
// refused, naming each key, rather than accepted to no effect; on a wstunnel node with the
// tunnel, WildcardDNS, IngressTLS and IngressClusterIssuer are the virtual kubelet's own, and
// only FrontDoor, shadowgate's, is refused.
func TestFrontDoorKeysWithoutForwardedPorts(t *testing.T) {
	const ssh = "ShadowMode: ssh\nSSH:\n  LoginHost: login.hpc.example.org\n  User: alice\n  KeySecret: hpc-ssh-key\n"
	frontDoor := network.Child("FrontDoor")
	for sentence, c := range map[string]struct {
		lines string
		want  []vt.Err
	}{
		"An SSH node without EnableTunnel and without front-door keys is valid.": {
			lines: "EnableTunnel: false\n" + ssh},
		"An SSH node without EnableTunnel refuses every front-door key it sets.": {
			lines: "EnableTunnel: false\n" + ssh + "WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nIngressTLS: false\nFrontDoor: {ControllerNamespace: ingress-nginx}\n",
			want: []vt.Err{
				{Type: field.ErrorTypeInvalid, Field: network.Child("WildcardDNS").String(), Value: "apps.example.org"},
				{Type: field.ErrorTypeInvalid, Field: network.Child("IngressClusterIssuer").String(), Value: "letsencrypt"},
				{Type: field.ErrorTypeInvalid, Field: frontDoor.String(), Value: "a mapping"},
				{Type: field.ErrorTypeInvalid, Field: network.Child("IngressTLS").String(), Value: false},
			}},
		"An SSH node without EnableTunnel refuses a complete front door, naming WildcardDNS.": {
			lines: "EnableTunnel: false\n" + ssh + "WildcardDNS: apps.example.org\nFrontDoor: {TLSSecret: apps-wildcard-tls, ControllerNamespace: ingress-nginx}\n",
			want: []vt.Err{
				{Type: field.ErrorTypeInvalid, Field: network.Child("WildcardDNS").String(), Value: "apps.example.org"},
				{Type: field.ErrorTypeInvalid, Field: frontDoor.String(), Value: "a mapping"},
			}},
		"A wstunnel node without EnableTunnel refuses WildcardDNS.": {
			lines: "EnableTunnel: false\nShadowMode: wstunnel\nWildcardDNS: apps.example.org\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: network.Child("WildcardDNS").String(), Value: "apps.example.org"}}},
		"A wstunnel node with the tunnel keeps the virtual kubelet's ingress keys.": {
			lines: "EnableTunnel: true\nShadowMode: wstunnel\nWildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nIngressTLS: false\n"},
		"A wstunnel node with the tunnel refuses FrontDoor, shadowgate's key.": {
			lines: "EnableTunnel: true\nShadowMode: wstunnel\nWildcardDNS: apps.example.org\nFrontDoor: {ControllerNamespace: ingress-nginx}\n",
			want:  []vt.Err{{Type: field.ErrorTypeInvalid, Field: frontDoor.String(), Value: "a mapping"}}},
	} {
		t.Run(sentence, func(t *testing.T) {
			_, errs := validate.ParsePolicy([]byte(node(c.lines)), validate.CredentialRules{})
			vt.Expect(t, errs, c.want)
		})
	}
}

// A pod chooses which of its ports the front door publishes, only among the TCP ports it
// declares, and only on a node that has a front door.
func TestFrontDoorPortsOfAPod(t *testing.T) {
	withDoor := mustPolicy(t, sshFrontDoor("WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n"))
	without := mustPolicy(t, sshFrontDoor(""))
	door := validate.AnnotationFrontDoorPorts
	for name, c := range map[string]struct {
		without bool // on the node without a front door
		value   string
		extra   string // interlink.eu/wstunnel-extra-ports
		want    []vt.Err
		ports   []int32
	}{
		"A declared TCP port is published.":                               {value: "8888", ports: []int32{8888}},
		"Ports may be separated by commas or spaces.":                     {value: "8888, 9000", extra: "9000", ports: []int32{8888, 9000}},
		"A port of interlink.eu/wstunnel-extra-ports is a declared port.": {value: "9000", extra: "9000:api", ports: []int32{9000}},
		"A port the pod does not declare is refused.": {value: "8888 22",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(door), Value: "22"}}},
		"A UDP port is refused: the shadow carries TCP only.": {value: "5353", extra: "5353:dns:UDP",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(door), Value: "5353"}}},
		"A port listed twice is refused.": {value: "8888,8888",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(door), Value: "8888"}}},
		"Something other than a port number is refused.": {value: "8888 http",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(door), Value: "http"}}},
		"none publishes no port.": {value: "none", ports: []int32{}},
		"An empty list is refused.": {value: " ",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(door), Value: " "}}},
		"The annotation on a node without a front door is refused.": {without: true, value: "8888",
			want: []vt.Err{{Type: field.ErrorTypeForbidden, Field: annPath(door), Value: ""}}},
	} {
		t.Run(name, func(t *testing.T) {
			a := ann(door, c.value)
			if c.extra != "" {
				a[validate.AnnotationExtraPorts] = c.extra
			}
			pol := withDoor
			if c.without {
				pol = without
			}
			o, d := validate.Pod(podOn("cern-vk", a), validate.Config{Policy: pol})
			vt.Expect(t, d.Errors, c.want)
			if len(c.want) == 0 && (!slices.Equal(o.FrontDoorPorts, c.ports) || o.FrontDoorPorts == nil) {
				t.Errorf("published ports %v (nil: every port), want %v", o.FrontDoorPorts, c.ports)
			}
		})
	}
}

// A pod on a node with a front door that lists no ports publishes every TCP port it declares:
// no more than interlink.eu/front-door-ports may list, as each is a URL its Tunnel holds.
func TestAPodPublishesAtMostSixtyFourPorts(t *testing.T) {
	withDoor := mustPolicy(t, sshFrontDoor("WildcardDNS: apps.example.org\nIngressClusterIssuer: letsencrypt\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n"))
	extra := func(n int) string {
		var entries []string
		for p := range n {
			entries = append(entries, fmt.Sprintf("%d:p%d", 10000+p, p))
		}
		return strings.Join(entries, ",")
	}
	for name, c := range map[string]struct {
		extra string
		want  []vt.Err
	}{
		"64 ports are published.": {extra: extra(63)},
		"65 ports are refused at the annotation that would choose among them.": {extra: extra(64),
			want: []vt.Err{{Type: field.ErrorTypeTooMany, Field: annPath(validate.AnnotationFrontDoorPorts), Value: 65}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, d := validate.Pod(podOn("cern-vk", ann(validate.AnnotationExtraPorts, c.extra)), validate.Config{Policy: withDoor})
			vt.Expect(t, d.Errors, c.want)
		})
	}
}
