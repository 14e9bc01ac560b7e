package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is where chosen ports start: above the well-known and most registered service
// ports a developer's machine may run.
const lowest = 10000

// handedOut holds every port Port has returned in this process, so two tests of one test
// binary running in parallel are never told the same port. Test binaries of other packages,
// running at the same time, keep their own: choosing below the ephemeral range and checking
// that the port is free leaves them only the moment between the choice and the bind.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Port returns a TCP port that is free on every given address at the time of the call and
// that no earlier call in this process returned. It is chosen at random below the kernel's
// ephemeral range: a port there is what any process's bind of port 0 or outgoing connection
// may take next, so between the choice and the child's bind it could be lost to a listener
// of another test, or to one bound on the wildcard address, which takes it from every
// loopback address.
func Port(hosts ...string) (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	highest := ephemeralStart() - 1
	for range 1000 {
		port := lowest + rand.IntN(highest-lowest+1)
		if !handedOut.ports[port] && freeOn(port, hosts) {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port in %d-%d free on all of %v after 1000 tries", lowest, highest, hosts)
}

// ephemeralStart is the first port of the kernel's ephemeral range, or Linux's default start
// where /proc does not say or leaves fewer than 1,000 ports below it.
func ephemeralStart() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\t")
	start, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || start < lowest+1000 {
		return linuxDefault
	}
	return start
}

func freeOn(port int, hosts []string) bool {
	for _, h := range hosts {
		l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}
