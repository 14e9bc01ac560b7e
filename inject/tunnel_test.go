package inject

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// These tests run the scripts of a rendered shadow against real OpenSSH on loopback: an sshd
// as the login node, HTTP services as compute nodes, each on an address of its own, and the
// shadow's listeners on another, standing for its pod IP.

// site is one login node, two compute nodes serving the same port, and a rendered shadow
// whose mounts are emulated by temporary directories.
type site struct {
	login    *sshtest.Server
	bastion  *sshtest.Server   // nil unless siteOptions.bastion
	nodes    map[string]string // compute node name to its address
	port     int
	listen   string
	shadow   *Shadow
	mounts   map[string]string
	nodeFile string
}

type siteOptions struct {
	mode        string
	pinned      bool     // a KnownHostsConfigMap, else accept-new
	sshdConfig  []string // lines for the login node's sshd_config
	nodeTimeout string
	connect     string // ExecConnectCommand, default nc
	loginPort   int    // the policy's Port when not the login sshd's: one nothing listens on
	// bastion puts a second sshd in front of the login node, as SSH.Bastion, which lets the
	// shadow's key in and opens channels to the login sshd alone (PermitOpen); with pinned,
	// its host key is in the same known_hosts as the login node's unless bastionUnpinned.
	bastion         bool
	bastionUnpinned bool
	bastionPort     int    // the policy's Bastion.Port when not the bastion sshd's: one nothing listens on
	discovery       string // NodeDiscovery, default configmap
	// bench: node07 runs a benchServer (pathbench_test.go) on the port rather than HTTP
	// servers on both nodes.
	bench bool
	// extraSSH is more of the policy's SSH block, one "Key: value" a line.
	extraSSH string
}

const pollEnv = "SHADOW_POLL_INTERVAL=0.1"

func newSite(t testing.TB, opt siteOptions) *site {
	t.Helper()
	sshtest.Require(t, "ssh", "socat", "nc")
	sshdConfig, user, keys := opt.sshdConfig, "", ""
	if opt.bench {
		// The login account is one with a plain /bin/sh, as a site's service account is, not
		// the account running the tests, whose shell start-up files every exec-mode channel
		// would pay for; sshd reads its authorized_keys as that user.
		user = newAccount(t, jobUser).name
		keys = filepath.Join(sharedDir(t), "authorized_keys")
		sshdConfig = append([]string{"AuthorizedKeysFile " + keys}, sshdConfig...)
	}
	s := &site{login: sshtest.StartSSHD(t, sshdConfig...), listen: sshtest.Loopback(t),
		nodes: map[string]string{"node07": sshtest.NodeAddress(t), "node11": sshtest.NodeAddress(t)}}
	if user == "" {
		user = s.login.User
	} else {
		copyFile(t, s.login.ClientKey+".pub", keys, 0o644)
	}
	s.port = sshtest.FreePort(t, s.nodes["node07"], s.nodes["node11"], s.listen)
	for name, addr := range s.nodes {
		switch {
		case !opt.bench:
			sshtest.StartHTTP(t, addr, s.port, name)
		case name == "node07":
			startBenchServer(t, addr, s.port)
		}
	}
	knownHosts := ""
	if opt.pinned {
		knownHosts = "KnownHostsConfigMap: login-known-hosts"
	}
	timeout := opt.nodeTimeout
	if timeout == "" {
		timeout = "1m"
	}
	connect := opt.connect
	if connect == "" {
		connect = "nc"
	}
	discovery := opt.discovery
	if discovery == "" {
		discovery = policy.NodeDiscoveryConfigMap
	}
	doc := loginPolicy(s.login, user, fmt.Sprintf("ForwardMode: %s\nExecConnectCommand: %s\nNodeWaitTimeout: %s\nNodeDiscovery: %s\n%s\n%s",
		opt.mode, connect, timeout, discovery, knownHosts, opt.extraSSH))
	if opt.loginPort != 0 {
		doc = strings.Replace(doc, fmt.Sprintf("Port: %d\n", s.login.Port), fmt.Sprintf("Port: %d\n", opt.loginPort), 1)
	}
	if opt.bastion {
		s.bastion = sshtest.StartSSHD(t, fmt.Sprintf("PermitOpen %s:%d", s.login.Host, s.login.Port), "ForceCommand /bin/false", "PermitTTY no")
		// One credential for both hops, as the policy has one KeySecret: the login node's key.
		appendFile(t, filepath.Join(filepath.Dir(s.bastion.ClientKey), "authorized_keys"), "\n"+sshtest.ReadFile(t, s.login.ClientKey+".pub"))
		port := s.bastion.Port
		if opt.bastionPort != 0 {
			port = opt.bastionPort
		}
		doc += fmt.Sprintf("        Bastion: {Host: %s, Port: %d}\n", s.bastion.Host, port)
	}
	s.shadow, _ = render(t, doc, offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: int32(s.port)}))

	s.mounts = map[string]string{nodeDir: t.TempDir(), stateDir: t.TempDir(), keyDir: t.TempDir(), knownHostsDir: t.TempDir()}
	s.nodeFile = filepath.Join(s.mounts[nodeDir], validate.ComputeNodeKey)
	copyFile(t, s.login.ClientKey, filepath.Join(s.mounts[keyDir], keyFile), 0o400)
	copyFile(t, s.login.KnownHosts, filepath.Join(s.mounts[knownHostsDir], knownHostsKey), 0o644)
	if opt.bastion && !opt.bastionUnpinned {
		appendFile(t, filepath.Join(s.mounts[knownHostsDir], knownHostsKey), "\n"+sshtest.ReadFile(t, s.bastion.KnownHosts))
	}
	writeAtomically(t, s.nodeFile, "")
	return s
}

// publish writes a compute node's address into the node file, as the virtual kubelet does.
func (s *site) publish(t testing.TB, node string) {
	t.Helper()
	writeAtomically(t, s.nodeFile, s.nodes[node])
}

func (s *site) forward(t testing.TB, env ...string) *process {
	t.Helper()
	return runContainer(t, container(t, s.shadow.Deployment, containerForward), s.mounts,
		append([]string{"SHADOW_LISTEN_ADDRESS=" + s.listen, pollEnv}, env...)...)
}

// forwardTo publishes node, starts ssh-forward and waits until a request reaches that node.
func (s *site) forwardTo(t *testing.T, node string) *process {
	t.Helper()
	s.publish(t, node)
	p := s.forward(t)
	s.expectReply(t, node)
	return p
}

// get makes one HTTP request through the shadow's listener.
func (s *site) get() (string, error) {
	client := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + net.JoinHostPort(s.listen, strconv.Itoa(s.port)) + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// expectReply waits until a request through the shadow reaches the named compute node.
func (s *site) expectReply(t *testing.T, node string) {
	t.Helper()
	s.expectReplyWithin(t, node, 20*time.Second)
}

// expectReplyWithin is expectReply with another bound.
func (s *site) expectReplyWithin(t *testing.T, node string, bound time.Duration) {
	t.Helper()
	eventually(t, bound, func() error {
		body, err := s.get()
		if err != nil {
			return err
		}
		if body != "hello from "+node+"\n" {
			return fmt.Errorf("reply %q, want one from %s", body, node)
		}
		return nil
	})
}

func TestForwardCarriesHTTPToTheComputeNode(t *testing.T) {
	for name, opt := range map[string]siteOptions{
		"portforward mode with a pinned host key":         {mode: policy.ForwardModePortForward, pinned: true},
		"portforward mode trusting the host key at first": {mode: policy.ForwardModePortForward},
		"exec mode with a pinned host key":                {mode: policy.ForwardModeExec, pinned: true},
		"exec mode trusting the host key at first":        {mode: policy.ForwardModeExec},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, opt)
			s.publish(t, "node07")
			s.forward(t)
			for range 3 {
				s.expectReply(t, "node07")
			}
			learned := filepath.Join(s.mounts[stateDir], "known_hosts")
			if _, err := os.Stat(learned); opt.pinned == (err == nil) {
				t.Errorf("pinned %v, yet the learned known_hosts file exists: %v", opt.pinned, err == nil)
			}
			if opt.mode == policy.ForwardModeExec {
				// Every relay rides the one control master: the login node saw one login.
				// sshd's log reaches s.login.Log() through a pipe copied on its own goroutine,
				// so wait for the master's line to arrive before counting.
				eventually(t, 10*time.Second, func() error {
					if !strings.Contains(s.login.Log(), "Accepted publickey") {
						return fmt.Errorf("the login node's log has no login yet")
					}
					return nil
				})
				if n := strings.Count(s.login.Log(), "Accepted publickey"); n != 1 {
					t.Errorf("the login node accepted %d logins for 3 requests, want 1 (the control master)", n)
				}
			}
		})
	}
}

// benchTunnel starts the shadow's ssh-forward in mode to node07 of a bench site (a
// benchServer there, `nc -N` as the connect command) and returns the site and the tunnel's
// entrance once a connection through it is answered.
func benchTunnel(t *testing.T, mode string) (*site, string) {
	t.Helper()
	s := newSite(t, siteOptions{mode: mode, pinned: true, connect: "nc -N", bench: true})
	s.publish(t, "node07")
	p := s.forward(t)
	entrance := net.JoinHostPort(s.listen, strconv.Itoa(s.port))
	waitForPath(t, entrance, p)
	return s, entrance
}

// An answer may follow the client's end of data (a client that half-closes, as `nc -N` does,
// then waits): the connection stays open that way until the node's side ends too.
func TestExecModeCarriesAnAnswerThatFollowsTheClientsEnd(t *testing.T) {
	t.Parallel()
	_, entrance := benchTunnel(t, policy.ForwardModeExec)
	c, err := dialPath(entrance, opLateAnswer)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := []byte("select * from jobs")
	if _, err := c.Write(sent); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(lateAnswerDelay + 20*time.Second))
	answer, err := io.ReadAll(c)
	if err != nil || len(answer) != 8 {
		t.Fatalf("after the client's end of data the tunnel carried %d bytes of the answer (%v), want the 8 the node wrote %s later", len(answer), err, lateAnswerDelay)
	}
	if got := binary.BigEndian.Uint64(answer); got != uint64(len(sent)) {
		t.Errorf("the node got %d bytes before the client's end, want %d", got, len(sent))
	}
}

// Each socket that carries a connection's bytes at the shadow's entrance and at the login node
// sends as the data comes (TCP_NODELAY), so a reply a server writes in parts, a header and then
// a body, is not held for the client's delayed ACK, 40 ms each. In exec mode the listener sets
// it on every connection; the login node's sshd sets it on a login once it runs a session,
// which exec mode's channels are and portforward mode runs one of.
func TestTheTunnelSendsRepliesAsTheyCome(t *testing.T) {
	for _, mode := range []string{policy.ForwardModePortForward, policy.ForwardModeExec} {
		t.Run(mode+" mode", func(t *testing.T) {
			t.Parallel()
			s, entrance := benchTunnel(t, mode)
			// A connection held open, one byte echoed through it, so that its sockets exist.
			c, err := dialPath(entrance, opEcho)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
				t.Fatalf("nothing echoed through the tunnel: %v", err)
			}
			places := []struct {
				what string
				addr netip.AddrPort
			}{
				{"the shadow's entrance", netip.AddrPortFrom(netip.MustParseAddr(s.listen), uint16(s.port))},
				{"the login node", netip.AddrPortFrom(netip.MustParseAddr(s.login.Host), uint16(s.login.Port))},
			}
			// Portforward mode's session follows its first check: both may take their bound.
			eventually(t, time.Minute, func() error {
				socks, err := connectedSockets(places[0].addr, places[1].addr)
				if err != nil {
					return err
				}
				for _, at := range places {
					if len(socks[at.addr]) == 0 {
						return fmt.Errorf("no process holds a connected socket at %s, %s", at.what, at.addr)
					}
					for _, sock := range socks[at.addr] {
						if !sock.noDelay {
							return fmt.Errorf("%s (pid %d) holds a socket at %s, %s, without TCP_NODELAY", sock.command, sock.pid, at.what, at.addr)
						}
					}
				}
				return nil
			})
		})
	}
}

// socketOption is one connected TCP socket of a process, and whether it has TCP_NODELAY.
type socketOption struct {
	pid     int
	command string
	noDelay bool
}

// connectedSockets finds every connected TCP socket bound to one of addrs in any process, by
// address, in one pass over the processes; each is read through a copy of its descriptor
// (pidfd_getfd, which needs the right to trace the process: root), and it fails naming that
// right when it lacks it.
func connectedSockets(addrs ...netip.AddrPort) (map[netip.AddrPort][]socketOption, error) {
	procs, err := bench.Processes()
	if err != nil {
		return nil, err
	}
	found := map[netip.AddrPort][]socketOption{}
	for _, proc := range procs {
		pid := proc.PID
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("reading the sockets of process %d (%s) needs root: %w", pid, proc.Comm, err)
		}
		if err != nil {
			continue // gone
		}
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone
		}
		for _, fd := range fds {
			n, err := strconv.Atoi(fd.Name())
			if err != nil {
				continue
			}
			if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, n)); err != nil || !strings.HasPrefix(link, "socket:") {
				continue
			}
			sock, err := unix.PidfdGetfd(pidfd, n, 0)
			if errors.Is(err, unix.EPERM) {
				unix.Close(pidfd)
				return nil, fmt.Errorf("reading the sockets of process %d (%s) needs root or CAP_SYS_PTRACE: %w", pid, proc.Comm, err)
			}
			if err != nil {
				continue // closed meanwhile, or the process is gone
			}
			addr, noDelay, ok := connectedSocket(sock)
			unix.Close(sock)
			if ok && slices.Contains(addrs, addr) {
				found[addr] = append(found[addr], socketOption{pid: pid, command: proc.Comm, noDelay: noDelay})
			}
		}
		unix.Close(pidfd)
	}
	return found, nil
}

// connectedSocket says whether sock is a connected IPv4 TCP socket, the address it is bound
// to, and whether it has TCP_NODELAY.
func connectedSocket(sock int) (addr netip.AddrPort, noDelay, ok bool) {
	if typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return addr, false, false
	}
	if listening, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || listening == 1 {
		return addr, false, false
	}
	name, err := unix.Getsockname(sock)
	if err != nil {
		return addr, false, false
	}
	in4, isIPv4 := name.(*unix.SockaddrInet4)
	if !isIPv4 {
		return addr, false, false
	}
	if _, err := unix.Getpeername(sock); err != nil {
		return addr, false, false
	}
	v, err := unix.GetsockoptInt(sock, unix.IPPROTO_TCP, unix.TCP_NODELAY)
	return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)), v == 1, err == nil
}

func TestForwardRebuildsTheTunnelWhenTheNodeChanges(t *testing.T) {
	for _, mode := range []string{policy.ForwardModePortForward, policy.ForwardModeExec} {
		t.Run(mode+" mode follows a requeued job to its new node without restarting", func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{mode: mode, pinned: true})
			p := s.forwardTo(t, "node07")
			before := p.children(t, "ssh")
			s.publish(t, "node11")
			s.expectReply(t, "node11")
			want := fmt.Sprintf("compute node changed from %s to %s, rebuilding the tunnel", s.nodes["node07"], s.nodes["node11"])
			// The script's output reaches p.out through a pipe copied on its own goroutine,
			// so the line may trail the reply from the new node a moment.
			eventually(t, 10*time.Second, func() error {
				if !strings.Contains(p.out.String(), want) {
					return fmt.Errorf("the log lacks %q", want)
				}
				return nil
			})
			// In place: the script the container runs is still there, and it has replaced its
			// ssh rather than left the old one running beside a new one.
			if !p.running() {
				t.Fatalf("the script exited while rebuilding; it must rebuild in place")
			}
			after := p.children(t, "ssh")
			if len(before) != 1 || len(after) != 1 || after[0] == before[0] {
				t.Errorf("ssh under the script: %v before the node changed, %v after; want one, replaced", before, after)
			}
		})
	}
}

func TestForwardKeepsItsTunnelWhenTheNodeFileHoldsNoHostname(t *testing.T) {
	for _, mode := range []string{policy.ForwardModePortForward, policy.ForwardModeExec} {
		t.Run(mode+" mode passes nothing but a hostname to ssh", func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{mode: mode, pinned: true})
			p := s.forwardTo(t, "node07")
			pwned := filepath.Join(t.TempDir(), "pwned")
			writeAtomically(t, s.nodeFile, s.nodes["node11"]+" -oProxyCommand=touch "+pwned+" '$(touch "+pwned+")'")
			eventually(t, 15*time.Second, func() error {
				if !strings.Contains(p.out.String(), "ignoring compute node") {
					return fmt.Errorf("ssh-forward has not logged that it ignores the value")
				}
				return nil
			})
			s.expectReply(t, "node07")
			if _, err := os.Stat(pwned); err == nil {
				t.Errorf("the value in the node file ran a command")
			}
			if !p.running() {
				t.Errorf("ssh-forward exited")
			}
		})
	}
}

func TestForwardExitsNonZeroWhenSSHDiesOnAnUnchangedNode(t *testing.T) {
	for _, mode := range []string{policy.ForwardModePortForward, policy.ForwardModeExec} {
		t.Run(mode+" mode hands a dead tunnel to Kubernetes", func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{mode: mode, pinned: true})
			p := s.forwardTo(t, "node07")
			ssh := p.children(t, "ssh")
			if len(ssh) != 1 {
				t.Fatalf("want one ssh under the script, found %v", ssh)
			}
			if err := syscall.Kill(ssh[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.expectFailure(t, 15*time.Second, "ssh died; want non-zero so the container restarts", "ssh exited with status")
		})
	}
}

// Should exec mode's control master be gone, ssh logs in on its own: with the policy's login,
// port, key and pinned host key, never with ssh's defaults.
func TestExecRelayWithoutItsControlMasterLogsInWithThePolicysOptions(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{mode: policy.ForwardModeExec, pinned: true})
	forward := container(t, s.shadow.Deployment, containerForward)
	relay := forward
	relay.Name = "exec-relay"
	relay.Command = []string{"sh", envValue(forward, envExecRelay)}
	p := runContainer(t, relay, s.mounts, "SHADOW_CONTROL_PATH="+filepath.Join(t.TempDir(), "no-master"),
		"SHADOW_EXEC_SLOTS="+t.TempDir(), "SHADOW_RELAY_COMMAND=echo relayed without a master")
	if code := p.wait(t, 10*time.Second); code != 0 || !strings.Contains(p.out.String(), "relayed without a master") {
		t.Errorf("exec-relay without a master: exit code %d, output:\n%s", code, p.out)
	}
}

// Exec mode carries more connections than one login has channels by opening more logins, up
// to ExecMaxLogins, queues the rest until a channel is free, and closes a login once no
// connection uses it.
func TestExecModeOpensLoginsAsChannelsRunOutAndQueuesTheRest(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{mode: policy.ForwardModeExec, pinned: true, connect: "nc -q 1", bench: true,
		sshdConfig: []string{"MaxSessions 2"}, extraSSH: "ExecSessionsPerLogin: 2\nExecMaxLogins: 3"})
	s.publish(t, "node07")
	s.forward(t, "SHADOW_CHECK_INTERVAL=1")
	addr := net.JoinHostPort(s.listen, strconv.Itoa(s.port))
	waitForPath(t, addr, nil)
	logins := func() int { return strings.Count(s.login.Log(), "Accepted publickey") }
	eventually(t, 10*time.Second, func() error {
		if logins() != 1 {
			return fmt.Errorf("%d logins, want the control master's alone", logins())
		}
		return nil
	})

	// Three logins of one relayed channel each: three connections held open at once use all.
	var held []net.Conn
	for i := range 3 {
		c, err := dialPath(addr, opEcho)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		echo(t, c, fmt.Sprintf("held %d", i))
		held = append(held, c)
	}
	if n := logins(); n != 3 {
		t.Errorf("%d logins for three connections at once, want 3 (one channel each, one kept for checks)", n)
	}
	// A fourth waits for a channel rather than being reset, and is carried once one is free.
	fourth, err := dialPath(addr, opEcho)
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	answered := make(chan error, 1)
	go func() {
		buf := []byte("queued")
		if _, err := fourth.Write(buf); err != nil {
			answered <- err
			return
		}
		_ = fourth.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := io.ReadFull(fourth, buf)
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("the fourth connection was answered (%v) while every channel was held", err)
	case <-time.After(2 * time.Second):
	}
	held[0].Close()
	if err := <-answered; err != nil {
		t.Fatalf("the queued connection, once a channel was free: %v", err)
	}
	if n := logins(); n != 3 {
		t.Errorf("%d logins, want no more than ExecMaxLogins 3", n)
	}
	for _, c := range held[1:] {
		c.Close()
	}
	fourth.Close()
	// With no connection left, the logins beyond the first are closed by the next check.
	eventually(t, 20*time.Second, func() error {
		if n := strings.Count(s.login.Log(), "Disconnected from user"); n != 2 {
			return fmt.Errorf("%d logins closed, want the 2 beyond the control master", n)
		}
		return nil
	})
}

// echo writes msg through c and expects it back.
func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo of %q: %q, %v", msg, buf, err)
	}
	_ = c.SetDeadline(time.Time{})
}

func TestLoginNodeWithoutTCPForwarding(t *testing.T) {
	t.Run("portforward mode fails as the guide says", func(t *testing.T) {
		t.Parallel()
		s := newSite(t, siteOptions{mode: policy.ForwardModePortForward, pinned: true, sshdConfig: []string{"AllowTcpForwarding no"}})
		s.publish(t, "node07")
		p := s.forward(t)
		eventually(t, 10*time.Second, func() error {
			body, err := s.get()
			if err == nil {
				return fmt.Errorf("a request got %q through a login node that refuses forwarding", body)
			}
			if !strings.Contains(p.out.String(), "open failed: administratively prohibited: open failed") {
				return fmt.Errorf("request failed (%v) but ssh-forward has not logged the refusal", err)
			}
			return nil
		})
	})
	t.Run("exec mode still carries the request", func(t *testing.T) {
		t.Parallel()
		s := newSite(t, siteOptions{mode: policy.ForwardModeExec, pinned: true, sshdConfig: []string{"AllowTcpForwarding no"}})
		s.forwardTo(t, "node07")
	})
}

func TestWaitForNode(t *testing.T) {
	t.Run("an empty node file keeps it waiting until a node is published", func(t *testing.T) {
		t.Parallel()
		s := newSite(t, siteOptions{mode: policy.ForwardModePortForward})
		p := runContainer(t, container(t, s.shadow.Deployment, containerWaitForNode), s.mounts, pollEnv)
		time.Sleep(time.Second)
		if !p.running() {
			t.Fatalf("wait-for-node exited with an empty node file:\n%s", p.out)
		}
		s.expectNodeTaken(t, p, "node07")
	})
	for name, node := range map[string]string{
		"a node that is not a hostname is not taken":            "node07 -oProxyCommand=touch",
		"the login node's loopback is not taken":                "127.0.0.1",
		"the cloud metadata address is not taken":               "169.254.169.254",
		"a numeric shorthand is not taken":                      "0x7f.1",
		"a node whose newline would forge a log line is quoted": "node07\n2026-01-01T00:00:00Z forged: line",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{mode: policy.ForwardModePortForward})
			writeAtomically(t, s.nodeFile, node)
			p := runContainer(t, container(t, s.shadow.Deployment, containerWaitForNode), s.mounts, pollEnv)
			eventually(t, 15*time.Second, func() error {
				if !p.running() {
					return fmt.Errorf("wait-for-node exited on an invalid node:\n%s", p.out)
				}
				if !strings.Contains(p.out.String(), "not a hostname or IP address") {
					return fmt.Errorf("the log does not say why the value is ignored")
				}
				return nil
			})
			if strings.Contains(p.out.String(), "\n2026-01-01T00:00:00Z forged") {
				t.Errorf("the refused value began a log line of its own:\n%s", p.out)
			}
			// Still waiting: the first valid node is the one it takes.
			s.expectNodeTaken(t, p, "node07")
		})
	}
	t.Run("a short timeout fails it with the likely causes", func(t *testing.T) {
		t.Parallel()
		s := newSite(t, siteOptions{mode: policy.ForwardModePortForward, nodeTimeout: "1s"})
		p := runContainer(t, container(t, s.shadow.Deployment, containerWaitForNode), s.mounts, pollEnv)
		cm := path.Join(s.shadow.NodeConfigMap.Namespace, s.shadow.NodeConfigMap.Name)
		p.expectFailure(t, 15*time.Second, "wait-for-node succeeded without a node",
			"no compute node after 1s (NodeWaitTimeout): "+cm, "still queued", "PodStatus.NodeName", "kubectl get configmap "+s.shadow.NodeConfigMap.Name)
	})
}

// expectNodeTaken publishes node and expects wait-for-node p to exit 0 having taken it.
func (s *site) expectNodeTaken(t *testing.T, p *process, node string) {
	t.Helper()
	s.publish(t, node)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d once %s was published", code, node)
	}
	if want := "compute node is " + s.nodes[node]; !strings.Contains(p.out.String(), want) {
		t.Errorf("the log lacks %q", want)
	}
}

func copyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t testing.TB, name, content string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
