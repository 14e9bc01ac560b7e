package inject

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/interlink-hq/shadowgate/validate"
)

// labelNamespaceName is the label the API server sets on every namespace to its name.
const labelNamespaceName = "kubernetes.io/metadata.name"

// metadataRanges are left out where the shadow may reach any address on a port: the
// link-local ranges and the cloud metadata services outside them (validate/syntax's host rule
// refuses the same addresses by name).
var (
	metadataRangesV4 = []string{"169.254.0.0/16", "100.100.100.200/32", "168.63.129.16/32"}
	metadataRangesV6 = []string{"fe80::/10", "fd00:ec2::254/128", "fd00:ec2::23/128", "fd20:ce::254/128", "fd00:c1::a9fe:a9fe/128"}
)

// networkPolicy holds the shadow pod to what it is for: the job's traffic leaves from it, past
// the egress NetworkPolicies of the pod's namespace. Egress: DNS to any address on port 53 (so
// that NodeLocal DNSCache and other resolvers keep working), the login node's SSH port, and the
// destinations of the pod's reverse forwards; ingress: the forwarded ports, from the pod's own
// namespace only, where the clients of the offloaded pod would have been, and, with a front
// door, the ports it publishes from the namespace of the pods that proxy it
// (FrontDoor.ProxyNamespace).
func (b *builder) networkPolicy() *networkingv1.NetworkPolicy {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	dns := intstr.FromInt32(53)
	egress := []networkingv1.NetworkPolicyEgressRule{
		{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}}},
		b.egressTo(b.ssh.LoginHost, b.ssh.Port),
	}
	var namespaces []string
	for _, f := range b.o.Forwards {
		addr, err := netip.ParseAddr(f.DialHost)
		if ns, inCluster := validate.ServiceNamespace(f.DialHost); err != nil && inCluster && b.allowsNamespace(ns) {
			// No port: a Service's port is not the port its pods listen on, which is what the
			// policy sees after the Service's address translation.
			if !slices.Contains(namespaces, ns) {
				namespaces = append(namespaces, ns)
				egress = append(egress, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{namespacePeer(ns)}})
			}
			continue
		}
		if err == nil && addr.Unmap().IsLoopback() {
			continue // the shadow pod's own loopback, which no NetworkPolicy governs
		}
		egress = append(egress, b.egressTo(f.DialHost, f.Port))
	}
	ingress := []networkingv1.NetworkPolicyIngressRule{}
	if len(b.ports) > 0 {
		rule := networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{namespacePeer(b.pod.Namespace)}}
		for _, p := range b.ports {
			port := intstr.FromInt32(p.Port)
			rule.Ports = append(rule.Ports, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &port})
		}
		ingress = append(ingress, rule)
	}
	if published := b.publishedPorts(); len(published) > 0 {
		rule := networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{namespacePeer(b.o.Node.Network.FrontDoor.ProxyNamespace())}}
		for _, p := range published {
			port := intstr.FromInt32(p.Port)
			rule.Ports = append(rule.Ports, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &port})
		}
		ingress = append(ingress, rule)
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: b.meta(b.name),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelShadow: b.name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     ingress,
			Egress:      egress,
		},
	}
}

// allowsNamespace mirrors the namespace half of validate's destination rule, which admitted
// the forward: a name it admitted by NameSuffixes alone is an outside name here.
func (b *builder) allowsNamespace(ns string) bool {
	allowed := &b.o.Node.Network.SSH.Reverse.AllowedDestinations
	return (allowed.PodNamespace && ns == b.pod.Namespace) || slices.Contains(allowed.Namespaces, ns)
}

// egressTo opens port to host: to the one address when host is an IP address, else (a name
// is not resolved at admission) to every address but the metadata ranges.
func (b *builder) egressTo(host string, port int) networkingv1.NetworkPolicyEgressRule {
	tcp := corev1.ProtocolTCP
	p := intstr.FromInt(port)
	rule := networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}}
	if addr, err := netip.ParseAddr(host); err == nil {
		addr = addr.Unmap()
		rule.To = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(addr, addr.BitLen()).String()}}}
		return rule
	}
	rule.To = []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: metadataRangesV4}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: metadataRangesV6}},
	}
	return rule
}

func namespacePeer(ns string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelNamespaceName: ns}}}
}
