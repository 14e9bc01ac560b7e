package freeport

import "testing"

func TestPortIsNeverHandedOutTwice(t *testing.T) {
	// Without the record, a few hundred binds of port 0 on one address repeat a port
	// (5 or 6 times in 300 on this machine class).
	seen := map[int]bool{}
	for range 300 {
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

func TestPortIsFreeOnEveryAddress(t *testing.T) {
	hosts := []string{"127.0.0.1", "127.3.4.5", "127.6.7.8"}
	port, err := Port(hosts...)
	if err != nil {
		t.Fatal(err)
	}
	if !freeOn(port, hosts) {
		t.Fatalf("port %d is not free on all of %v", port, hosts)
	}
}
