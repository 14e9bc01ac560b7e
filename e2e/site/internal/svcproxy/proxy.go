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
	"k8s.io/apimachinery/pkg/util/intstr"
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
	pods     corev1listers.PodLister
	logf     func(format string, args ...any)

	mu        sync.Mutex
	listeners map[servicePort]*portListener
	// failing holds the ports that could not listen, with why: logged once, retried by Sync.
	failing map[servicePort]string
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

// New builds a Proxy over the listers; pods are those of this node, the endpoints of last
// resort (see localEndpoints). The logger receives one line per listener change and per
// connection that found no endpoint.
func New(services corev1listers.ServiceLister, slices discoverylisters.EndpointSliceLister, pods corev1listers.PodLister, logger *log.Logger) *Proxy {
	return &Proxy{services: services, slices: slices, pods: pods, logf: logger.Printf, listeners: map[servicePort]*portListener{}, failing: map[servicePort]string{}}
}

// Sync opens listeners for new Service ports and closes those of Services (or ports) gone. A
// port it cannot listen on (another process holds the address) is logged once and retried on
// the next Sync; the error is only for the listers failing.
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
	for key := range p.failing {
		if !want[key] {
			delete(p.failing, key)
		}
	}
	for key := range want {
		if _, ok := p.listeners[key]; ok {
			continue
		}
		ln, err := net.Listen("tcp", key.addr.String())
		if err != nil {
			if msg := err.Error(); p.failing[key] != msg {
				p.failing[key] = msg
				p.logf("service %s/%s port %q: cannot listen (retrying): %v", key.namespace, key.name, key.portName, err)
			}
			continue
		}
		delete(p.failing, key)
		pl := &portListener{ln: ln}
		p.listeners[key] = pl
		p.logf("service %s/%s: listening on %s", key.namespace, key.name, key.addr)
		go p.serve(key, pl)
	}
	return nil
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

// readyEndpoints lists host:port of the ready endpoints of the Service's port: those of its
// EndpointSlices, else those of this node's pods.
func (p *Proxy) readyEndpoints(key servicePort) []string {
	if eps := p.sliceEndpoints(key); len(eps) > 0 {
		return eps
	}
	return p.localEndpoints(key)
}

// localEndpoints are the ready pods of this node that the Service selects, as the EndpointSlice
// controller would list them. It is needed because the API server refuses loopback addresses
// in EndpointSlices, and on the site a pod's IP is the node's address, typically 127.0.0.1:
// the controller then writes no endpoint for the pods this node runs.
func (p *Proxy) localEndpoints(key servicePort) []string {
	if p.pods == nil {
		return nil
	}
	svc, err := p.services.Services(key.namespace).Get(key.name)
	if err != nil || len(svc.Spec.Selector) == 0 {
		return nil
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == key.portName {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return nil
	}
	pods, err := p.pods.Pods(key.namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return nil
	}
	var out []string
	for _, pod := range pods {
		if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || !podReady(pod) {
			continue
		}
		if port, ok := targetPort(sp, pod); ok {
			out = append(out, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))
		}
	}
	return out
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// targetPort resolves a Service port's targetPort for a pod: a number, a container port's
// name, or (unset) the Service port itself.
func targetPort(sp *corev1.ServicePort, pod *corev1.Pod) (int, bool) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.String && tp.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == tp.StrVal {
					return int(cp.ContainerPort), true
				}
			}
		}
		return 0, false
	case tp.IntValue() > 0:
		return tp.IntValue(), true
	default:
		return int(sp.Port), true
	}
}

// sliceEndpoints lists the ready endpoints the Service's slices give for the port; the
// slice's port number is the Service's targetPort already resolved.
func (p *Proxy) sliceEndpoints(key servicePort) []string {
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
