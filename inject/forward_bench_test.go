package inject

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// crowdSize is how many connections a notebook's browser may open at once, which exec mode
// must carry through a login node with sshd's default MaxSessions of 10.
const crowdSize = 200

// BenchmarkTunnelForward measures the shadow's ssh-forward, as rendered, against plain ssh
// doing the same with the same options, each round alternating which goes first: in
// portforward mode against `ssh -N -L`, in exec mode against a control master carrying each
// connection as an `ssh -W` channel. Both end at a benchServer on a compute node address,
// through a real sshd as the login node with its default MaxSessions. In exec mode a third
// path ("session-") carries each connection as a session of the same master running the
// connect command, as the shadow's relay does but without socat and exec-relay: what OpenSSH
// itself costs the mode, where TCP forwarding is off.
func BenchmarkTunnelForward(b *testing.B) {
	for _, mode := range []string{policy.ForwardModePortForward, policy.ForwardModeExec} {
		b.Run(mode, func(b *testing.B) {
			const connect = "nc -N" // the site's ExecConnectCommand, and the session's
			s := newSite(b, siteOptions{mode: mode, pinned: true, connect: connect, bench: true})
			s.publish(b, "node07")
			p := s.forward(b)
			path := net.JoinHostPort(s.listen, strconv.Itoa(s.port))
			waitForPath(b, path, p)
			base, session := s.plainForward(b, mode, connect)
			if mode != policy.ForwardModeExec {
				measurePaired(b, path, base).report(b)
				return
			}
			rounds := measureInterleaved(b, path, base, session)
			pairedFigures{path: rounds[0], base: rounds[1]}.report(b)
			reportFigures(b, "session-", rounds[2])
			s.reportCrowd(b, p, path, base)
		})
	}
}

// reportCrowd opens crowdSize connections at once through the exec tunnel, all of which must
// complete, while sampling the memory of the container's processes against its limit; and
// the same through the plain control master, whose completions are reported, not required:
// one master carries at most MaxSessions channels.
func (s *site) reportCrowd(b *testing.B, p *process, path, base string) {
	b.Helper()
	stop := make(chan struct{})
	peak := peakMemory(p.cmd.Process.Pid, stop)
	crowd := measureCrowd(path, crowdSize)
	close(stop)
	mem := <-peak
	if crowd.completed != crowdSize {
		b.Fatalf("%d of %d connections opened at once completed through the exec tunnel: %s", crowd.completed, crowdSize, crowd.summary())
	}
	limits := container(b, s.shadow.Deployment, containerForward).Resources.Limits
	limit := limits.Memory()
	b.ReportMetric(crowdSize, "tunnel-crowd-opened")
	b.ReportMetric(float64(crowd.completed), "tunnel-crowd-completed")
	b.ReportMetric(crowd.wall.Seconds(), "tunnel-crowd-s")
	b.ReportMetric(float64(mem)/(1<<20), "tunnel-crowd-peak-MiB")
	b.ReportMetric(float64(limit.Value())/(1<<20), "tunnel-memory-limit-MiB")
	if mem > limit.Value() {
		b.Errorf("the container's processes peaked at %s with %d connections, over its memory limit %s",
			resource.NewQuantity(mem, resource.BinarySI), crowdSize, limit)
	}
	plain := measureCrowd(base, crowdSize)
	b.ReportMetric(float64(plain.completed), "plain-crowd-completed")
}

// plainForward starts the baseline of mode beside the shadow's ssh-forward: the same ssh
// options, to the same compute node, on an address of its own, which it returns. In exec mode
// it also returns the address of a session per connection on the same master, running
// connect to the node and port as the shadow's relay does.
func (s *site) plainForward(b *testing.B, mode, connect string) (base, session string) {
	b.Helper()
	options := plainOptions(b, container(b, s.shadow.Deployment, containerForward), s.mounts)
	listen := sshtest.Loopback(b)
	target := net.JoinHostPort(s.nodes["node07"], strconv.Itoa(s.port))
	addr := net.JoinHostPort(listen, strconv.Itoa(s.port))
	if mode == policy.ForwardModePortForward {
		startPlain(b, append(append([]string{"-N"}, options...), "-L", addr+":"+target, "--", s.login.Host)...)
		waitForPath(b, addr, nil)
		return addr, ""
	}
	control := filepath.Join(b.TempDir(), "control")
	startPlain(b, append(append([]string{"-N", "-o", "ControlMaster=yes", "-o", "ControlPath=" + control}, options...), "--", s.login.Host)...)
	mux := append([]string{"-o", "ControlMaster=no", "-o", "ControlPath=" + control}, options...)
	relayEach(b, addr, append(slices.Clone(mux), "-W", target, "--", s.login.Host))
	session = net.JoinHostPort(sshtest.Loopback(b), strconv.Itoa(s.port))
	relayEach(b, session, append(slices.Clone(mux), "-T", "--", s.login.Host, fmt.Sprintf("%s '%s' '%d'", connect, s.nodes["node07"], s.port)))
	deadline := time.Now().Add(20 * time.Second)
	for exec.Command("ssh", "-o", "ControlPath="+control, "-O", "check", "--", s.login.Host).Run() != nil {
		if time.Now().After(deadline) {
			b.Fatal("the plain control master did not come up within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return addr, session
}

// relayEach listens on addr and runs ssh with args for each connection, the connection its
// stdin and stdout, until the benchmark ends.
func relayEach(b *testing.B, addr string, args []string) {
	b.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				cmd := exec.Command("ssh", args...)
				cmd.Stdin, cmd.Stdout = c, c
				_ = cmd.Run()
			})
		}
	})
}

// plainOptions are the ssh options a container gives its ssh (SHADOW_SSH_OPTIONS), as -o
// arguments, its mounts rewritten to their emulating directories: what plain ssh beside it runs
// with.
func plainOptions(b *testing.B, c corev1.Container, mounts map[string]string) []string {
	b.Helper()
	var options []string
	for _, e := range containerEnv(b, c, withScriptsVolume(b, c, mounts)) {
		if v, ok := strings.CutPrefix(e, envSSHOptions+"="); ok {
			for _, opt := range strings.Split(v, "\n") {
				if opt != "" {
					options = append(options, "-o", opt)
				}
			}
		}
	}
	return options
}

// startPlain runs ssh with args until the benchmark ends.
func startPlain(b *testing.B, args ...string) {
	b.Helper()
	cmd := exec.Command("ssh", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &strings.Builder{}
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if b.Failed() {
			mu.Lock()
			b.Logf("plain ssh %s:\n%s", strings.Join(args, " "), out)
			mu.Unlock()
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitForPath waits until a set-up through addr succeeds, failing the benchmark after 20s or
// when p, the tunnel's process, exits.
func waitForPath(b testing.TB, addr string, p *process) {
	b.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := ping(addr)
		if err == nil {
			return
		}
		if p != nil && !p.running() {
			b.Fatalf("the tunnel exited: %v\n%s", p.err, p.out)
		}
		if time.Now().After(deadline) {
			b.Fatalf("no connection through %s within 20s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
