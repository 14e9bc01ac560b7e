package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on a thread of its own moved into the network namespace at nsPath, and
// moves the thread back before it serves any other goroutine. A socket fn opens stays in that
// namespace for its whole life, whichever thread uses it later.
func inNetns(nsPath string, fn func() error) error {
	target, err := os.Open(nsPath)
	if err != nil {
		return err
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := setns(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering the network namespace %s: %w", nsPath, err)
	}
	fnErr := fn()
	if err := setns(orig); err != nil {
		// The thread stays locked and ends with this goroutine: no other goroutine may run
		// in the node's namespace.
		return errors.Join(fnErr, fmt.Errorf("leaving the network namespace %s: %w", nsPath, err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }

// dialInNetns dials addr from inside the network namespace at nsPath.
func dialInNetns(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(nsPath, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// forwarder listens in a network namespace and carries each connection to an address of this
// machine's own namespace: the node reaches the API server and the registry on loopback at the
// very addresses they have here.
type forwarder struct {
	l     net.Listener
	to    string
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// forward listens on listen inside the network namespace at nsPath and connects each
// connection it accepts to to.
func forward(nsPath, listen, to string) (*forwarder, error) {
	f := &forwarder{to: to, conns: map[net.Conn]struct{}{}}
	if err := inNetns(nsPath, func() error {
		var err error
		f.l, err = net.Listen("tcp", listen)
		return err
	}); err != nil {
		return nil, fmt.Errorf("listening on %s in %s: %w", listen, nsPath, err)
	}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		in, err := f.l.Accept()
		if err != nil {
			return // closed by stop
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.carry(in)
		}()
	}
}

func (f *forwarder) carry(in net.Conn) {
	out, err := net.Dial("tcp", f.to)
	if err != nil {
		in.Close()
		return
	}
	if !f.track(in, out) {
		return
	}
	defer f.untrack(in, out)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if c, ok := dst.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
}

// track records the connections of one forwarded stream, or closes them when the forwarder is
// stopping.
func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(f.conns, c)
	}
}

// stop closes the listener and every forwarded connection, and waits for them to end.
func (f *forwarder) stop() {
	_ = f.l.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
