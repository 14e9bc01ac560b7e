package freeport

import (
	"net"
	"testing"
)

func TestPortIsNeverHandedOutTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 2000 {
		port, err := Port("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}

func TestPortIsFreeOnEveryAddressAndBelowTheEphemeralRange(t *testing.T) {
	hosts := []string{"127.0.0.1", "127.3.4.5", "127.6.7.8"}
	port, err := Port(hosts...)
	if err != nil {
		t.Fatal(err)
	}
	if !freeOn(port, hosts) {
		t.Fatalf("port %d is not free on all of %v", port, hosts)
	}
	if port < lowest || port >= ephemeralStart() {
		t.Fatalf("port %d is outside %d-%d", port, lowest, ephemeralStart()-1)
	}
}

func TestAPortListenedOnIsNotFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	if freeOn(taken, []string{"127.0.0.1"}) {
		t.Fatalf("port %d is listened on, yet reported free", taken)
	}
}
