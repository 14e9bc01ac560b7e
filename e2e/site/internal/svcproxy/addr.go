package svcproxy

import (
	"fmt"
	"net/netip"
)

// serviceRange is the API server's --service-cluster-ip-range on the site.
var serviceRange = netip.MustParsePrefix("10.0.0.0/16")

// Loopback maps a ClusterIP 10.0.c.d to the loopback address 127.100.c.d that stands for it:
// the whole of 127.0.0.0/8 reaches this machine without configuration, and the last two
// octets keep the mapping one-to-one over the /16.
func Loopback(clusterIP string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(clusterIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("clusterIP %q: %w", clusterIP, err)
	}
	if !serviceRange.Contains(ip) {
		return netip.Addr{}, fmt.Errorf("clusterIP %s is outside the service range %s", ip, serviceRange)
	}
	b := ip.As4()
	return netip.AddrFrom4([4]byte{127, 100, b[2], b[3]}), nil
}
