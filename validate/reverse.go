package validate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// loopback is 127.0.0.0/8, every address of which is local on Linux.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// sharedLoopback is where every node-local service and every other job listens.
var sharedLoopback = netip.MustParseAddr("127.0.0.1")

// loopbackBroadcast is 127/8's broadcast address: Linux lets a listener bind it, but a connect
// to it fails with "Network is unreachable", so the job's relay could never reach the forwards.
var loopbackBroadcast = netip.MustParseAddr("127.255.255.255")

// ParseBind parses interlink.eu/reverse-bind. The address is checked after parsing, so an
// IPv4-mapped form such as ::ffff:127.0.0.1 is judged as the address it becomes.
func ParseBind(value string, p *field.Path) (netip.Addr, field.ErrorList) {
	addr, err := netip.ParseAddr(value)
	if err != nil || addr.Zone() != "" {
		return netip.Addr{}, field.ErrorList{field.Invalid(p, value,
			"not an IP address; give a 127.x.y.z address such as 127.0.10.1, or remove the annotation and shadowgate chooses one")}
	}
	addr = addr.Unmap()
	switch {
	case !loopback.Contains(addr):
		return netip.Addr{}, field.ErrorList{field.Invalid(p, value,
			"not a 127.x.y.z loopback address: the forwards would listen where other machines can reach them; give a 127.x.y.z address, or remove the annotation and shadowgate chooses one")}
	case addr == sharedLoopback:
		return netip.Addr{}, field.ErrorList{field.Invalid(p, value,
			"127.0.0.1 is shared with every other job and node-local service on the compute node, so the forwards would collide; give another 127.x.y.z address, or remove the annotation and shadowgate chooses one")}
	case addr == loopbackBroadcast:
		return netip.Addr{}, field.ErrorList{field.Invalid(p, value,
			"127.255.255.255 is the broadcast address of 127.0.0.0/8: the forwards would listen there, but no connection to it can be made (Network is unreachable), so the job would wait for the tunnel and fail; give another 127.x.y.z address, or remove the annotation and shadowgate chooses one")}
	}
	return addr, nil
}

// parseSocksPort parses interlink.eu/reverse-socks-port.
func parseSocksPort(value string, p *field.Path) (int, field.ErrorList) {
	port, why := parsePort(value)
	if why != "" {
		return 0, field.ErrorList{field.Invalid(p, value, fmt.Sprintf("%s; give the SOCKS5 proxy's port, such as 1080", why))}
	}
	if port < minUnprivilegedPort {
		return 0, field.ErrorList{field.Invalid(p, value, fmt.Sprintf(
			"port %d is below %d and cannot be bound by the unprivileged sshd on the compute node; give a port such as 1080", port, minUnprivilegedPort))}
	}
	return port, nil
}

// clusterDomain is the cluster's DNS domain, as the shadow's Service names are written
// elsewhere (inject's preexec): a cluster with another domain names its Services by it, and
// such names are judged as names outside the cluster.
const clusterDomain = "cluster.local"

// refusedDestinations refuses every forward that leads where the node's
// Reverse.AllowedDestinations does not allow: the job's traffic leaves from the shadow pod, past
// the egress NetworkPolicies of the pod's namespace, so the admin decides where it may go.
func (o *Offload) refusedDestinations(p *field.Path) field.ErrorList {
	allowed := &o.Node.Network.SSH.Reverse.AllowedDestinations
	var errs field.ErrorList
	for _, f := range o.Forwards {
		if why := destinationProblem(f.DialHost, o.Namespace, allowed); why != "" {
			errs = append(errs, field.Invalid(p, f.Entry, fmt.Sprintf(
				"virtual node %s does not allow reverse forwards to %q: %s", o.NodeName, f.Host, why)))
		}
	}
	return errs
}

// destinationProblem says why host, as the shadow dials it, is outside allowed for a pod of
// namespace, naming what the admin would add to Network.SSH.Reverse.AllowedDestinations, or "".
// Names are judged as written, never resolved: a Service's namespace is read from the forms
// cluster DNS answers (<svc>.<ns>, <host>.<svc>.<ns>, each also with .svc or
// .svc.cluster.local), which the shadow's search path tries before any outside name.
func destinationProblem(host, namespace string, allowed *policy.AllowedDestinations) string {
	const ask = "; ask the cluster admin to add"
	lower := strings.ToLower(host)
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		lower = "127.0.0.1"
	}
	if addr, err := netip.ParseAddr(lower); err == nil {
		addr = addr.Unmap()
		for _, cidr := range allowed.CIDRs {
			if prefix, err := netip.ParsePrefix(cidr); err == nil && prefix.Contains(addr) {
				return ""
			}
		}
		return fmt.Sprintf("the IP address %s is in none of AllowedDestinations.CIDRs %v%s a prefix holding it to Network.SSH.Reverse.AllowedDestinations.CIDRs, or forward to a Service of namespace %s by name",
			addr, allowed.CIDRs, ask, namespace)
	}
	for _, suffix := range allowed.NameSuffixes {
		if suffix = strings.ToLower(suffix); lower == suffix || strings.HasSuffix(lower, "."+suffix) {
			return ""
		}
	}
	ns, inCluster := ServiceNamespace(lower)
	if !inCluster {
		return fmt.Sprintf("the name is no Service name of the cluster (<service>.<namespace>[.svc[.%s]]) and ends in none of AllowedDestinations.NameSuffixes %v%s its domain to Network.SSH.Reverse.AllowedDestinations.NameSuffixes",
			clusterDomain, allowed.NameSuffixes, ask)
	}
	if (allowed.PodNamespace && ns == namespace) || slices.Contains(allowed.Namespaces, ns) {
		return ""
	}
	own := ""
	if allowed.PodNamespace {
		own = fmt.Sprintf(" beside the pod's own namespace %s", namespace)
	}
	return fmt.Sprintf("it names a Service of namespace %s, which is not among AllowedDestinations.Namespaces %v%s%s %s to Network.SSH.Reverse.AllowedDestinations.Namespaces (or, for a name outside the cluster, its domain to AllowedDestinations.NameSuffixes)",
		ns, allowed.Namespaces, own, ask, ns)
}

// ServiceNamespace reads the namespace of a cluster DNS name of a Service or of one of its
// endpoints, lower-case: <svc>.<ns> and <host>.<svc>.<ns>, bare or followed by .svc or by
// .svc.<clusterDomain>. inCluster is false for any other name. inject renders the shadow's
// NetworkPolicy by it, so the policy opens what this rule admits.
func ServiceNamespace(name string) (ns string, inCluster bool) {
	name = strings.ToLower(name)
	rest := strings.TrimSuffix(name, ".svc."+clusterDomain)
	if rest == name {
		rest = strings.TrimSuffix(name, ".svc")
	}
	labels := strings.Split(rest, ".")
	if len(labels) != 2 && len(labels) != 3 {
		return "", false
	}
	return labels[len(labels)-1], true
}
