package validate

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/syntax"
)

// minUnprivilegedPort is the lowest port the unprivileged sshd on the compute node can bind.
const minUnprivilegedPort = 1024

// Forward is one endpoint of interlink.eu/reverse-forwards.
type Forward struct {
	// ListenPort is the port the job connects to on the bind address.
	ListenPort int
	// Host is the name the job uses; /etc/hosts maps it to the bind address.
	Host string
	// Port is the port dialled inside the cluster.
	Port int
	// DialHost is what the shadow dials: Host, or Host.<pod namespace> for a bare Service name,
	// since the shadow usually runs in another namespace.
	DialHost string
}

// bracketed matches an endpoint whose host is an IPv6 literal: [listen:][addr]:port.
var bracketed = regexp.MustCompile(`^(?:([^:\[\]]+):)?\[([^\[\]]*)\]:([^:\[\]]*)$`)

// ParseForwards parses interlink.eu/reverse-forwards: space-separated host:port or
// listen-port:host:port entries. Every bad entry is reported, each naming the entry.
func ParseForwards(value, namespace string, p *field.Path) ([]Forward, field.ErrorList) {
	entries := strings.Fields(value)
	if len(entries) == 0 {
		return nil, field.ErrorList{field.Invalid(p, value,
			"lists no endpoint; give space-separated host:port or listen-port:host:port entries, or remove the annotation")}
	}
	var (
		forwards []Forward
		errs     field.ErrorList
		seen     = map[int]string{}
	)
	for _, entry := range entries {
		f, entryErrs := parseForward(entry, namespace, p)
		if len(entryErrs) > 0 {
			errs = append(errs, entryErrs...)
			continue
		}
		if first, dup := seen[f.ListenPort]; dup {
			errs = append(errs, field.Invalid(p, entry, fmt.Sprintf(
				"listen port %d is already taken by %q; give this endpoint another listen port, as in %d:%s:%d",
				f.ListenPort, first, suggestPort(seen), f.Host, f.Port)))
			continue
		}
		seen[f.ListenPort] = entry
		forwards = append(forwards, f)
	}
	return forwards, errs
}

func parseForward(entry, namespace string, p *field.Path) (Forward, field.ErrorList) {
	var listen, host, port string
	if m := bracketed.FindStringSubmatch(entry); m != nil {
		listen, host, port = m[1], m[2], m[3]
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return Forward{}, field.ErrorList{field.Invalid(p, entry, "brackets are only for an IPv6 address, as in [fd00::1]:8080")}
		}
	} else {
		parts := strings.Split(entry, ":")
		switch len(parts) {
		case 2:
			host, port = parts[0], parts[1]
		case 3:
			listen, host, port = parts[0], parts[1], parts[2]
		default:
			return Forward{}, field.ErrorList{field.Invalid(p, entry,
				"each entry is host:port or listen-port:host:port (an IPv6 address in brackets)")}
		}
	}
	var errs field.ErrorList
	if why := hostProblem(host); why != "" {
		errs = append(errs, field.Invalid(p, entry, why))
	}
	portNum, why := parsePort(port)
	if why != "" {
		errs = append(errs, field.Invalid(p, entry, fmt.Sprintf("port %q %s", port, why)))
	}
	listenNum := portNum
	if listen != "" {
		if listenNum, why = parsePort(listen); why != "" {
			errs = append(errs, field.Invalid(p, entry, fmt.Sprintf("listen port %q %s", listen, why)))
		}
	}
	if len(errs) > 0 {
		return Forward{}, errs
	}
	if listenNum < minUnprivilegedPort {
		what := "listen port"
		if listen == "" {
			what = "port"
		}
		return Forward{}, field.ErrorList{field.Invalid(p, entry, fmt.Sprintf(
			"%s %d is below %d and cannot be bound by the unprivileged sshd on the compute node; give a listen port, as in %d:%s:%d, and connect to that port",
			what, listenNum, minUnprivilegedPort, suggestListen(portNum), host, portNum))}
	}
	return Forward{ListenPort: listenNum, Host: host, Port: portNum, DialHost: dialHost(host, namespace)}, nil
}

// hostProblem says what is wrong with a forward's host, or "". The shadow's ssh dials the host
// through the C library's resolver, so a name that resolver reads as a number is judged as one.
func hostProblem(host string) string {
	if ok, why := syntax.Host(host); !ok {
		return fmt.Sprintf("host %q is %s; give a Service name such as minio.user.svc.cluster.local or an IP address", host, why)
	}
	addr, err := netip.ParseAddr(host)
	if aton, numeric := inetAton(host); numeric && (err != nil || !addr.Is4()) {
		// 0xa9.0xfe.0xa9.0xfe, 0251.0376.0251.0376, 169.254.43518 and 2852039166 are all
		// 169.254.169.254 to inet_aton, and getaddrinfo asks it before any DNS lookup.
		if aton.IsValid() {
			return fmt.Sprintf("host %q is a numeric shorthand that the C library reads as the address %s; write the address as a.b.c.d, or use a DNS name", host, aton)
		}
		return fmt.Sprintf("host %q is made only of numbers, where the C library reads address shorthands (0x7f.1 is 127.0.0.1), but is no address written a.b.c.d; write the address as a.b.c.d, or use a DNS name", host)
	}
	if err != nil {
		return "" // a DNS name: what it resolves to is not known at admission
	}
	if why := refusedAddr(addr); why != "" {
		return fmt.Sprintf("host %q is %s, not a cluster endpoint; give a Service name or a Service IP", host, why)
	}
	return ""
}

// metadataAddrs are cloud metadata and credential services outside the link-local ranges.
var metadataAddrs = map[netip.Addr]string{
	netip.MustParseAddr("fd00:ec2::254"):      "AWS's instance metadata service (IPv6)",
	netip.MustParseAddr("fd00:ec2::23"):       "the EKS Pod Identity Agent (IPv6), which hands out AWS credentials",
	netip.MustParseAddr("fd20:ce::254"):       "Google Cloud's metadata server (IPv6)",
	netip.MustParseAddr("fd00:c1::a9fe:a9fe"): "Oracle Cloud's instance metadata service (IPv6)",
	netip.MustParseAddr("100.100.100.200"):    "Alibaba Cloud's metadata service",
}

// embedsIPv4 are the IPv6 prefixes whose last 32 bits are an IPv4 address a connection can
// end up at: NAT64's well-known prefix and the deprecated IPv4-compatible addresses.
var embedsIPv4 = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("::/96")}

// refusedAddr says why the shadow must not dial addr, or "". The shadow pod dials it: a
// link-local address is the node's or the cloud's metadata service, never a cluster Service,
// and the unspecified address is nobody. An IPv4 address written inside IPv6 is judged as itself.
func refusedAddr(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case addr.IsLinkLocalUnicast():
		return "a link-local address (the node's or the cloud's metadata service)"
	case addr.IsUnspecified():
		return "the unspecified address, which is nobody"
	}
	if what, ok := metadataAddrs[addr]; ok {
		return what
	}
	for _, prefix := range embedsIPv4 {
		if addr.Is6() && prefix.Contains(addr) {
			b := addr.As16()
			if why := refusedAddr(netip.AddrFrom4([4]byte(b[12:]))); why != "" {
				return why + " written inside IPv6"
			}
		}
	}
	return ""
}

// inetAton reads s as the C library's inet_aton does (glibc's and musl's alike): one to four
// dot-separated numbers, each decimal, 0x-prefixed hexadecimal or 0-prefixed octal, every one
// but the last at most 255 and the last filling the bytes left. numeric reports whether every
// label is such digits at all; addr is valid only when they also make an address.
func inetAton(s string) (addr netip.Addr, numeric bool) {
	labels := strings.Split(s, ".")
	values := make([]uint64, 0, len(labels))
	valid := len(labels) <= 4
	for _, label := range labels {
		v, isNumber, ok := atonNumber(label)
		if !isNumber {
			return netip.Addr{}, false
		}
		valid = valid && ok
		values = append(values, v)
	}
	if !valid {
		return netip.Addr{}, true
	}
	last := len(values) - 1
	var ip uint64
	for i, v := range values[:last] {
		if v > 0xff {
			return netip.Addr{}, true
		}
		ip |= v << (24 - 8*i)
	}
	if values[last] >= 1<<(32-8*last) {
		return netip.Addr{}, true
	}
	ip |= values[last]
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

// atonNumber reads one label as strtoul(label, &end, 0) does: isNumber when it is made of
// digits only (decimal, or hex after 0x), ok when strtoul takes all of it without overflowing
// 32 bits. Labels such as 08 or 0x are numbers to no resolver, but no DNS name anyone means.
func atonNumber(label string) (v uint64, isNumber, ok bool) {
	digits, base := label, 10
	switch {
	case len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X'):
		digits, base = label[2:], 16
		if strings.Trim(digits, "0123456789abcdefABCDEF") != "" {
			return 0, false, false
		}
	case label == "" || strings.Trim(label, "0123456789") != "":
		return 0, false, false
	case len(label) > 1 && label[0] == '0':
		digits, base = label[1:], 8
	}
	v, err := strconv.ParseUint(digits, base, 32)
	return v, true, err == nil
}

// dialHost qualifies a bare Service name with the pod's namespace: the shadow usually runs in
// <namespace>-shadow, where the bare name would resolve to another Service or to nothing.
func dialHost(host, namespace string) string {
	if strings.Contains(host, ".") || strings.EqualFold(host, "localhost") {
		return host
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	return host + "." + namespace
}

// parsePort accepts only decimal digits in 1-65535, so nothing else can ride along. It returns
// why s is not a port, or "".
func parsePort(s string) (int, string) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, "is not a port number"
	}
	n, _ := strconv.Atoi(s) // at most five digits: cannot overflow
	if n < 1 || n > 65535 {
		return 0, "is out of range 1-65535"
	}
	return n, ""
}

// suggestListen proposes an unprivileged listen port for a privileged Service port (443 -> 6443).
func suggestListen(port int) int {
	if port < minUnprivilegedPort {
		return port + 6000
	}
	return port
}

func suggestPort(taken map[int]string) int {
	for p := 10000; ; p++ {
		if _, used := taken[p]; !used {
			return p
		}
	}
}
