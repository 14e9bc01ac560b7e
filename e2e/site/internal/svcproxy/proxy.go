package svcproxy

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// maxConnsPerPort bounds the connections one service port carries at a time; more wait in
// the listen backlog.
const maxConnsPerPort = 256

// Proxy listens on the loopback address of every Service and carries TCP connections to its
// endpoints. Sync brings the listeners in line with the listers; call it whenever Services or
// EndpointSlices change (and periodically: it is cheap when nothing did).
type Proxy struct {
	services corev1listers.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	logf     func(format string, args ...any)

	mu        sync.Mutex
	listeners map[servicePort]*portListener
}

// servicePort is one listener: a Service's port on its loopback address.
type servicePort struct {
	namespace, name, portName string
	addr                      netip.AddrPort
}

type portListener struct {
	ln   net.Listener
	next atomic.Uint64 // round-robin over ready endpoints
}

// New builds a Proxy over the listers; logf receives one line per listener change and per
// connection that found no endpoint.
func New(services corev1listers.ServiceLister, slices discoverylisters.EndpointSliceLister, logger *log.Logger) *Proxy {
	return &Proxy{services: services, slices: slices, logf: logger.Printf, listeners: map[servicePort]*portListener{}}
}

// Sync opens listeners for new Service ports and closes those of Services (or ports) gone. It
// names the first port it could not listen on but still syncs the others.
func (p *Proxy) Sync() error {
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	want := map[servicePort]bool{}
	for _, s := range svcs {
		addr, err := Loopback(s.Spec.ClusterIP)
		if err != nil {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
				continue
			}
			want[servicePort{s.Namespace, s.Name, sp.Name, netip.AddrPortFrom(addr, uint16(sp.Port))}] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, pl := range p.listeners {
		if !want[key] {
			pl.ln.Close()
			delete(p.listeners, key)
			p.logf("service %s/%s: stopped listening on %s", key.namespace, key.name, key.addr)
		}
	}
	var firstErr error
	for key := range want {
		if _, ok := p.listeners[key]; ok {
			continue
		}
		ln, err := net.Listen("tcp", key.addr.String())
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("service %s/%s port %q: listen %s: %w", key.namespace, key.name, key.portName, key.addr, err)
			}
			continue
		}
		pl := &portListener{ln: ln}
		p.listeners[key] = pl
		p.logf("service %s/%s: listening on %s", key.namespace, key.name, key.addr)
		go p.serve(key, pl)
	}
	return firstErr
}

// Close stops every listener; connections in flight finish on their own.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, pl := range p.listeners {
		pl.ln.Close()
		delete(p.listeners, key)
	}
}

func (p *Proxy) serve(key servicePort, pl *portListener) {
	slots := make(chan struct{}, maxConnsPerPort)
	for {
		conn, err := pl.ln.Accept()
		if err != nil {
			return // closed by Sync or Close
		}
		slots <- struct{}{}
		go func() {
			defer func() { <-slots }()
			p.carry(key, pl, conn)
		}()
	}
}

func (p *Proxy) carry(key servicePort, pl *portListener, conn net.Conn) {
	defer conn.Close()
	backends := p.readyEndpoints(key)
	if len(backends) == 0 {
		p.logf("service %s/%s port %q: connection from %s refused: no ready endpoint", key.namespace, key.name, key.portName, conn.RemoteAddr())
		return
	}
	target := backends[pl.next.Add(1)%uint64(len(backends))]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		p.logf("service %s/%s: dial endpoint %s: %v", key.namespace, key.name, target, err)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); closeWrite(conn); done <- struct{}{} }()
	<-done
	<-done
}

// closeWrite passes a half-close on, so protocols that end with EOF in one direction work.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// readyEndpoints lists host:port of the ready endpoints the Service's slices give for the
// port; the slice's port number is the Service's targetPort already resolved.
func (p *Proxy) readyEndpoints(key servicePort) []string {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: key.name})
	slices, err := p.slices.EndpointSlices(key.namespace).List(sel)
	if err != nil {
		return nil
	}
	var out []string
	for _, sl := range slices {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 && sl.AddressType != discoveryv1.AddressTypeIPv6 {
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
