package validate

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"
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
