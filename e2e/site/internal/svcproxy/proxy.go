package svcproxy

import (
	"fmt"
	"log"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// Proxy makes the Services reachable from this machine as kube-proxy's nftables mode makes
// them reachable from a node: one nftables table of the node's, rewritten whole by each Sync,
// whose output-hook rules send a connection to a Service's ClusterIP and port to one of its
// ready endpoints, chosen at random per connection, and reset one to a Service with none. No
// socket is opened for a Service, so a pod listening on the Service's port (every pod shares the
// host's network) does not collide with it.
type Proxy struct {
	table    string
	services corev1listers.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	pods     corev1listers.PodLister
	logf     func(format string, args ...any)

	mu      sync.Mutex
	applied string // the ruleset nft last took, so an unchanged one is not applied again
}

// servicePort is one Service port: where a connection is sent (its ClusterIP and port), and
// the names that find its endpoints.
type servicePort struct {
	namespace, name, portName string
	addr                      netip.AddrPort
}

// New builds a Proxy keeping the nftables table named table (letters, digits and _) over the
// listers; pods are those of this node, the endpoints of last resort (see localEndpoints). The
// logger receives one line per ruleset applied.
func New(table string, services corev1listers.ServiceLister, slices discoverylisters.EndpointSliceLister, pods corev1listers.PodLister, logger *log.Logger) (*Proxy, error) {
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("nftables table name %q: want letters, digits and _", table)
	}
	return &Proxy{table: table, services: services, slices: slices, pods: pods, logf: logger.Printf}, nil
}

var tableName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,62}$`)

// Sync rewrites the table for the Services and endpoints the listers hold now, in one nft
// transaction (a connection never sees half of a change). The error is for the listers or nft
// failing.
func (p *Proxy) Sync() error {
	rules, err := p.ruleset()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if rules == p.applied {
		return nil
	}
	if err := nft(rules); err != nil {
		return err
	}
	p.applied = rules
	p.logf("services: applied nftables table %s (%d rules)", p.table, strings.Count(rules, "\n\t\tip daddr"))
	return nil
}

// Close removes the table.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := nft(fmt.Sprintf("table ip %[1]s {}\ndelete table ip %[1]s\n", p.table)); err != nil {
		p.logf("services: removing nftables table %s: %v", p.table, err)
	}
	p.applied = ""
}

// nft runs nft -f on rules.
func nft(rules string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f: %w: %s\n%s", err, out, rules)
	}
	return nil
}

// ruleset renders the table: it is created empty and deleted first, so applying it replaces
// whatever the table held. IPv4 TCP ports only, the site's service range.
func (p *Proxy) ruleset() (string, error) {
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return "", fmt.Errorf("list services: %w", err)
	}
	var ports []servicePort
	for _, s := range svcs {
		ip, err := netip.ParseAddr(s.Spec.ClusterIP)
		if err != nil || !ip.Is4() {
			continue // headless, or not IPv4
		}
		for _, sp := range s.Spec.Ports {
			if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
				continue
			}
			ports = append(ports, servicePort{s.Namespace, s.Name, sp.Name, netip.AddrPortFrom(ip, uint16(sp.Port))})
		}
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].addr.Compare(ports[j].addr) < 0 })
	var dnat, reject strings.Builder
	for _, key := range ports {
		eps := p.readyEndpoints(key)
		match := fmt.Sprintf("\t\tip daddr %s tcp dport %d", key.addr.Addr(), key.addr.Port())
		if len(eps) == 0 {
			fmt.Fprintf(&reject, "%s reject with tcp reset comment %q\n", match, key.namespace+"/"+key.name+" has no ready endpoint")
			continue
		}
		sort.Strings(eps)
		targets := make([]string, len(eps))
		for i, ep := range eps {
			host, port, _ := net.SplitHostPort(ep)
			targets[i] = fmt.Sprintf("%d : %s . %s", i, host, port)
		}
		fmt.Fprintf(&dnat, "%s dnat to numgen random mod %d map { %s } comment %q\n", match, len(eps), strings.Join(targets, ", "), key.namespace+"/"+key.name)
	}
	return fmt.Sprintf(`table ip %[1]s {}
delete table ip %[1]s
table ip %[1]s {
	chain services {
		type nat hook output priority -100; policy accept;
%[2]s	}
	chain no_endpoints {
		type filter hook output priority 0; policy accept;
%[3]s	}
}
`, p.table, dnat.String(), reject.String()), nil
}

// readyEndpoints lists host:port of the ready endpoints of the Service's port: those of its
// EndpointSlices, else those of this node's pods.
func (p *Proxy) readyEndpoints(key servicePort) []string {
	if eps := p.sliceEndpoints(key); len(eps) > 0 {
		return eps
	}
	return p.localEndpoints(key)
}

// localEndpoints are the ready pods of this node that the Service selects, as the EndpointSlice
// controller would list them. It is needed because the API server refuses loopback addresses
// in EndpointSlices, and on the site a pod's IP is the node's address, typically 127.0.0.1:
// the controller then writes no endpoint for the pods this node runs.
func (p *Proxy) localEndpoints(key servicePort) []string {
	if p.pods == nil {
		return nil
	}
	svc, err := p.services.Services(key.namespace).Get(key.name)
	if err != nil || len(svc.Spec.Selector) == 0 {
		return nil
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == key.portName {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return nil
	}
	pods, err := p.pods.Pods(key.namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return nil
	}
	var out []string
	for _, pod := range pods {
		if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || !podReady(pod) {
			continue
		}
		if port, ok := targetPort(sp, pod); ok {
			out = append(out, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))
		}
	}
	return out
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// targetPort resolves a Service port's targetPort for a pod: a number, a container port's
// name, or (unset) the Service port itself.
func targetPort(sp *corev1.ServicePort, pod *corev1.Pod) (int, bool) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.String && tp.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == tp.StrVal {
					return int(cp.ContainerPort), true
				}
			}
		}
		return 0, false
	case tp.IntValue() > 0:
		return tp.IntValue(), true
	default:
		return int(sp.Port), true
	}
}

// sliceEndpoints lists the ready endpoints the Service's slices give for the port; the
// slice's port number is the Service's targetPort already resolved.
func (p *Proxy) sliceEndpoints(key servicePort) []string {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: key.name})
	slices, err := p.slices.EndpointSlices(key.namespace).List(sel)
	if err != nil {
		return nil
	}
	var out []string
	for _, sl := range slices {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		var port int32 = -1
		for _, ep := range sl.Ports {
			name := ""
			if ep.Name != nil {
				name = *ep.Name
			}
			if name == key.portName && ep.Port != nil {
				port = *ep.Port
			}
		}
		if port < 0 {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
			}
		}
	}
	return out
}
