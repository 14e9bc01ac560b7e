package harness

import (
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
)

// Balancer stands in for a Service in front of serve replicas: a TCP proxy on loopback that
// sends each new connection to the next of its backends in turn, as kube-proxy sends each new
// connection to one of a Service's ready endpoints. Like kube-proxy it does not retry: a
// connection to a backend that is gone fails, and TLS passes through to the replicas, which
// serve the same certificate.
type Balancer struct {
	Port int

	listener net.Listener
	mu       sync.Mutex
	backends []int // ports on 127.0.0.1
	next     int
	open     map[net.Conn]bool // both ends of every proxied connection, for Close
	closed   bool
	proxies  sync.WaitGroup
}

// StartBalancer listens on a free loopback port and balances over backends.
func StartBalancer(backends ...int) (*Balancer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{Port: l.Addr().(*net.TCPAddr).Port, listener: l, backends: backends, open: map[net.Conn]bool{}}
	b.proxies.Go(b.accept) // Close waits for it to return, as for the proxies
	return b, nil
}

// Remove takes a backend out, as an endpoint turning unready leaves a Service: new connections
// go elsewhere, open ones carry on.
func (b *Balancer) Remove(port int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = slices.DeleteFunc(b.backends, func(p int) bool { return p == port })
}

// Add puts a backend (back) in.
func (b *Balancer) Add(port int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.backends, port) {
		b.backends = append(b.backends, port)
	}
}

// Close stops accepting and closes every connection: the API server keeps idle ones open.
func (b *Balancer) Close() error {
	err := b.listener.Close()
	b.mu.Lock()
	b.closed = true
	for c := range b.open {
		c.Close()
	}
	b.mu.Unlock()
	b.proxies.Wait()
	return err
}

func (b *Balancer) accept() {
	for {
		conn, err := b.listener.Accept()
		if err != nil {
			return // closed
		}
		b.proxies.Go(func() { b.proxy(conn) })
	}
}

// track records an open connection until the returned func closes it. Once the balancer is
// closed it closes c at once and returns false: Close has been through b.open already.
func (b *Balancer) track(c net.Conn) (closeIt func(), ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		c.Close()
		return nil, false
	}
	b.open[c] = true
	return func() {
		c.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.open, c)
	}, true
}

// pick returns the next backend in turn, or false when there is none.
func (b *Balancer) pick() (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.backends) == 0 {
		return 0, false
	}
	b.next = (b.next + 1) % len(b.backends)
	return b.backends[b.next], true
}

// proxy copies both ways between the client and one backend until either side closes, then
// closes both, so a backend that goes away ends its clients' connections as well.
func (b *Balancer) proxy(client net.Conn) {
	closeClient, ok := b.track(client)
	if !ok {
		return
	}
	defer closeClient()
	port, ok := b.pick()
	if !ok {
		return
	}
	backend, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return
	}
	closeBackend, ok := b.track(backend)
	if !ok {
		return
	}
	defer closeBackend()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // ends with either side's close; nothing to report
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
}
