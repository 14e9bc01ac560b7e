package syntax

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// HostUse says who dials a host, which decides whether it may be a loopback address.
type HostUse int

const (
	// DialedByShadow is a host the shadow's own pod dials: LoginHost and the destinations of
	// reverse forwards. Loopback there is the shadow pod itself, where nothing but the shadow
	// listens, and where tests and a one-machine site run their login nodes.
	DialedByShadow HostUse = iota
	// DialedByLoginNode is a compute node: compute-node and what Slurm answers. The login node
	// dials it, so loopback would be the login node's own services.
	DialedByLoginNode
)

// maxHostLen is the longest name DNS carries (RFC 1035), and longer than any IP literal.
const maxHostLen = 253

// Host reports whether s may reach ssh as a host dialled as use says, and why not: an RFC 1123
// name (labels of at most 63 letters, digits and '-', not starting or ending with '-', in any
// case) whose last label is not all digits and which the C library does not read as a numeric
// address shorthand (0x7f.1, 2130706433, 127.1, 0177.0.0.1); or an IP literal without a zone
// that is not the unspecified address, link-local, a cloud metadata service, or, dialled by
// the login node, loopback (an IPv4 address written inside IPv6 by mapping, NAT64, SIIT, 6to4
// or Teredo is judged as itself); and no metadata service's name. The
// same rule is common.sh's valid_host (DialedByLoginNode) and valid_dial_host (DialedByShadow);
// testdata/hosts.txt holds the table both are tested with.
func Host(s string, use HostUse) (ok bool, reason string) {
	switch {
	case s == "":
		return false, "empty"
	case len(s) > maxHostLen:
		return false, fmt.Sprintf("longer than the %d characters a hostname can have", maxHostLen)
	}
	if addr, err := netip.ParseAddr(s); err == nil {
		if addr.Zone() != "" {
			return false, "an IP address with a zone, which is not allowed"
		}
		if why := refusedAddr(addr, use); why != "" {
			return false, why
		}
		return true, ""
	}
	if strings.HasPrefix(s, "-") {
		return false, "starts with '-', which ssh would read as an option"
	}
	if why := nameProblem(s); why != "" {
		return false, why
	}
	if aton, numeric := inetAton(s); numeric {
		// 0xa9.0xfe.0xa9.0xfe, 0251.0376.0251.0376, 169.254.43518 and 2852039166 are all
		// 169.254.169.254 to inet_aton, and getaddrinfo asks it before any DNS lookup.
		if aton.IsValid() {
			return false, fmt.Sprintf("a numeric shorthand that the C library reads as the address %s; write the address as a.b.c.d, or use a DNS name", aton)
		}
		return false, "made only of numbers, where the C library reads address shorthands (0x7f.1 is 127.0.0.1), but is no address written a.b.c.d; write the address as a.b.c.d, or use a DNS name"
	}
	labels := strings.Split(s, ".")
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return false, fmt.Sprintf("a name whose last label %q is all digits, which no top-level domain is and resolvers may read as an address; write an address as a.b.c.d, or use a DNS name", last)
	}
	lower := strings.ToLower(s)
	if what, ok := metadataNames[lower]; ok {
		return false, what + ", refused by name"
	}
	if use == DialedByLoginNode {
		if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
			return false, "a name of loopback (RFC 6761), the login node's own services"
		}
	}
	return true, ""
}

// nameProblem says why s is not an RFC 1123 name, or "".
func nameProblem(s string) string {
	for _, label := range strings.Split(s, ".") {
		switch {
		case label == "":
			return "not an RFC 1123 hostname or an IP address: it has an empty label"
		case len(label) > 63:
			return fmt.Sprintf("not an RFC 1123 hostname: a label of %d characters, where at most 63 are allowed", len(label))
		case strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "":
			return "not an RFC 1123 hostname or an IP address: only letters, digits, '-' and '.' are allowed"
		case label[0] == '-' || label[len(label)-1] == '-':
			return "not an RFC 1123 hostname: a label starts or ends with '-'"
		}
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
	netip.MustParseAddr("168.63.129.16"):      "Azure's WireServer, which hands out the VM's configuration and certificates",
}

// metadataNames are the names clouds give their metadata services. A name is not resolved at
// admission, so these are refused by name; a bare "metadata" or "instance-data" reaches them
// through the node's DNS search domains (google.internal, ec2.internal).
var metadataNames = map[string]string{
	"metadata":                   "a bare metadata name, which the node's search domains resolve to the cloud's metadata service",
	"metadata.google.internal":   "Google Cloud's metadata server",
	"metadata.goog":              "Google Cloud's metadata server",
	"metadata.azure.internal":    "Azure's metadata service",
	"instance-data":              "a bare name of AWS's instance metadata service",
	"instance-data.ec2.internal": "AWS's instance metadata service",
	"metadata.tencentyun.com":    "Tencent Cloud's metadata service",
}

// nat64LocalUse is RFC 8215's local-use NAT64 prefix: where in it the IPv4 address sits
// depends on the prefix length the site chose, so no embedded address can be judged.
var nat64LocalUse = netip.MustParsePrefix("64:ff9b:1::/48")

// sixToFour is 6to4 (RFC 3056): bits 16-47 are the IPv4 address of the relay a packet is sent to.
var sixToFour = netip.MustParsePrefix("2002::/16")

// teredo is Teredo (RFC 4380): bits 32-63 are the server's IPv4 address, and the last 32
// bits the client's, inverted.
var teredo = netip.MustParsePrefix("2001::/32")

// embedsIPv4 are the IPv6 prefixes whose last 32 bits are an IPv4 address a connection can
// end up at: NAT64's well-known prefix, the deprecated IPv4-compatible addresses and SIIT's
// IPv4-translated addresses (::ffff:0:a.b.c.d; IPv4-mapped ones are unmapped before).
var embedsIPv4 = []netip.Prefix{
	netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("::/96"), netip.MustParsePrefix("::ffff:0:0:0/96"),
}

// refusedAddr says why addr must not be dialled as use says, or "". A link-local address is
// the node's or the cloud's metadata service, never a cluster Service or a compute node, and
// the unspecified address is nobody. An IPv4 address written inside IPv6 is judged as itself.
func refusedAddr(addr netip.Addr, use HostUse) string {
	addr = addr.Unmap()
	switch {
	case addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast():
		return "a link-local address (the node's or the cloud's metadata service)"
	case addr.IsUnspecified():
		return "the unspecified address, which is nobody"
	case addr.IsLoopback() && use == DialedByLoginNode:
		return "a loopback address, the login node's own services"
	}
	if what, ok := metadataAddrs[addr]; ok {
		return what
	}
	if !addr.Is6() {
		return ""
	}
	if nat64LocalUse.Contains(addr) {
		return "in the local-use NAT64 prefix 64:ff9b:1::/48, where the IPv4 address it reaches cannot be told without the site's prefix length"
	}
	b := addr.As16()
	var embedded [][4]byte
	for _, prefix := range embedsIPv4 {
		if prefix.Contains(addr) {
			embedded = append(embedded, [4]byte(b[12:]))
		}
	}
	switch {
	case sixToFour.Contains(addr):
		embedded = append(embedded, [4]byte(b[2:6]))
	case teredo.Contains(addr):
		embedded = append(embedded, [4]byte(b[4:8]), [4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
	}
	for _, v4 := range embedded {
		if why := refusedAddr(netip.AddrFrom4(v4), use); why != "" {
			return why + " written inside IPv6"
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
