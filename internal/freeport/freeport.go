// Package freeport chooses TCP ports for tests that must tell another program which port to
// listen on (sshd, etcd, kube-apiserver, shadowgate serve). A listener of the test's own
// process should bind port 0 instead: only a port chosen in advance can be lost to a race.
package freeport

import (
	"fmt"
	"net"
	"strconv"
	"sync"
)

// handedOut holds every port Port has returned in this process. The kernel may give a port
// that was just closed to the next bind of port 0, so two tests running in parallel could
// otherwise be told the same port, and one of them might bind it on the wildcard address
// (an sshd with GatewayPorts yes), taking it from every loopback address.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Port returns a TCP port that is free on every given address at the time of the call and
// that no earlier call in this process returned.
func Port(hosts ...string) (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", hosts[0]+":0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		free := !handedOut.ports[port] && freeOn(port, hosts[1:])
		l.Close()
		if free {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port free on all of %v after 100 tries", hosts)
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
