package sshtest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/internal/freeport"
	"github.com/interlink-hq/shadowgate/internal/syncbuf"
)

// Server is a running sshd.
type Server struct {
	Host       string // the loopback address it listens on
	Port       int
	User       string // who may log in with ClientKey: the user running the tests
	ClientKey  string // private key file, mode 0400
	KnownHosts string // known_hosts naming the server's host key for [Host]:Port, Host alone on port 22
	log        *syncbuf.Buffer
}

// sshdPath is where Debian's openssh-server installs sshd, which must be run by absolute path.
const sshdPath = "/usr/sbin/sshd"

// StartSSHD starts sshd on a fresh loopback address and a free port: a login node. config
// lines (such as "AllowTcpForwarding no") come before shadowgate's defaults, and sshd keeps
// the first value of a keyword, so they override them.
func StartSSHD(t testing.TB, config ...string) *Server {
	t.Helper()
	return startSSHD(t, Loopback(t), 0, config)
}

// StartNodeSSHD is StartSSHD on a fresh compute node address (NodeAddress).
func StartNodeSSHD(t testing.TB, config ...string) *Server {
	t.Helper()
	return startSSHD(t, NodeAddress(t), 0, config)
}

// StartNodeSSHDOnPort is StartNodeSSHD listening on port, such as 22, where what dials a
// compute node's own sshd expects it: every node address is fresh, so its ports are free.
func StartNodeSSHDOnPort(t testing.TB, port int, config ...string) *Server {
	t.Helper()
	return startSSHD(t, NodeAddress(t), port, config)
}

// startSSHD starts sshd on host and port, a free one when port is 0.
func startSSHD(t testing.TB, host string, port int, config []string) *Server {
	t.Helper()
	Require(t, "sshd", "ssh-keygen")
	dir := t.TempDir()
	me, err := user.Current()
	if err != nil {
		t.Fatalf("sshtest: who am I: %v", err)
	}
	s := &Server{Host: host, User: me.Username, ClientKey: filepath.Join(dir, "id_ed25519"),
		KnownHosts: filepath.Join(dir, "known_hosts"), log: &syncbuf.Buffer{}}
	s.Port = port
	if port == 0 {
		s.Port = FreePort(t, s.Host)
	}
	hostKey := filepath.Join(dir, "host_ed25519")
	Keygen(t, hostKey)
	Keygen(t, s.ClientKey)
	if err := os.Chmod(s.ClientKey, 0o400); err != nil {
		t.Fatal(err)
	}
	hostPub := ReadFile(t, hostKey+".pub")
	// ssh looks a host up as [host]:port, except on port 22, as host alone.
	known := fmt.Sprintf("[%s]:%d", s.Host, s.Port)
	if s.Port == 22 {
		known = s.Host
	}
	writeFile(t, s.KnownHosts, known+" "+hostPub)
	writeFile(t, filepath.Join(dir, "authorized_keys"), ReadFile(t, s.ClientKey+".pub"))
	lines := append(append([]string{}, config...),
		fmt.Sprintf("ListenAddress %s:%d", s.Host, s.Port),
		"HostKey "+hostKey,
		"AuthorizedKeysFile "+filepath.Join(dir, "authorized_keys"),
		"PidFile none",
		"StrictModes no", // the keys live under /tmp, which is world-writable
		"UsePAM no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"MaxStartups 100",
	)
	cfg := filepath.Join(dir, "sshd_config")
	writeFile(t, cfg, strings.Join(lines, "\n"))
	// sshd refuses to start without its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("sshtest: starting sshd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("sshd log:\n%s", s.Log())
		}
	})
	addr := net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return s
		}
		select {
		case <-exited:
			t.Fatalf("sshtest: sshd exited at start:\n%s", s.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshtest: sshd not listening on %s after 10s:\n%s", addr, s.Log())
		}
	}
}

// Log is what sshd has logged so far.
func (s *Server) Log() string { return s.log.String() }

// ClientOptions are the ssh -o options that log in to s with host key checking on.
func (s *Server) ClientOptions() []string {
	return []string{
		"User=" + s.User,
		"Port=" + strconv.Itoa(s.Port),
		"IdentityFile=" + s.ClientKey,
		"IdentitiesOnly=yes",
		"BatchMode=yes",
		"StrictHostKeyChecking=yes",
		"UserKnownHostsFile=" + s.KnownHosts,
		"GlobalKnownHostsFile=/dev/null",
	}
}

// Loopback returns a random 127.x.y.z address other than 127.0.0.1, so tests running at the
// same time, in this package or another, do not share addresses.
func Loopback(t testing.TB) string {
	t.Helper()
	for {
		a, b, c := 1+rand.IntN(254), rand.IntN(256), 2+rand.IntN(252)
		addr := fmt.Sprintf("127.%d.%d.%d", a, b, c)
		if l, err := net.Listen("tcp", addr+":0"); err == nil {
			l.Close()
			return addr
		}
	}
}

// NodeRange is where compute nodes get their addresses: the benchmarking range, which
// EnterNodeNetwork makes local as 127.0.0.0/8 is. Compute nodes cannot be loopback addresses:
// the shadow refuses a compute node that is the login node's own loopback.
var NodeRange = netip.MustParsePrefix("198.18.0.0/15")

// nodeNetworkEnv marks the test binary run again inside the network namespace.
const nodeNetworkEnv = "SSHTEST_NODE_NETWORK"

// EnterNodeNetwork runs the test binary again in a network namespace of its own, whose
// loopback device also holds NodeRange, so compute nodes have addresses of their own, each
// reachable from the login nodes, without touching this machine's routing. A TestMain calls
// it first; it returns only inside the namespace, or when not root (NodeAddress then fails
// the tests that need one, saying why).
func EnterNodeNetwork() error {
	if os.Getenv(nodeNetworkEnv) != "" || os.Geteuid() != 0 {
		return nil
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return fmt.Errorf("sshtest: compute nodes need a network namespace of their own: %w (util-linux)", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("sshtest: compute nodes need a network namespace of their own: %w (iproute2)", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// An address of the range on lo makes all of it local, as 127.0.0.1/8 does 127.0.0.0/8,
	// and counts as IPv4 configured for getaddrinfo's AI_ADDRCONFIG, which slurmctld asks.
	lo := netip.PrefixFrom(NodeRange.Addr().Next(), NodeRange.Bits())
	setup := "ip link set lo up && ip addr add " + lo.String() + ` dev lo && exec "$0" "$@"`
	args := append([]string{unshare, "--net", "--", "/bin/sh", "-c", setup, self}, os.Args[1:]...)
	return syscall.Exec(unshare, args, append(os.Environ(), nodeNetworkEnv+"=1"))
}

// InNodeNetwork says whether this is the test binary run again inside the network namespace
// EnterNodeNetwork makes.
func InNodeNetwork() bool { return os.Getenv(nodeNetworkEnv) != "" }

// NodeAddress returns a random address of NodeRange, free to listen on: a compute node.
func NodeAddress(t testing.TB) string {
	t.Helper()
	base := NodeRange.Addr().As4()
	for range 100 {
		n := rand.IntN(1<<(32-NodeRange.Bits())-2) + 1
		addr := netip.AddrFrom4([4]byte{base[0], base[1] + byte(n>>16), byte(n >> 8), byte(n)}).String()
		l, err := net.Listen("tcp", addr+":0")
		if err == nil {
			l.Close()
			return addr
		}
		if os.Getenv(nodeNetworkEnv) == "" {
			t.Fatalf("sshtest: %s is not local (%v): compute node addresses exist only in the network namespace EnterNodeNetwork makes, which needs root", addr, err)
		}
	}
	t.Fatalf("sshtest: no free address in %s", NodeRange)
	return ""
}

// FreePort returns a TCP port that is free on every given address at the time of the call and
// that no earlier call in this process returned: a port for sshd's ListenAddress, or for a
// server that must listen on the same port on several addresses.
func FreePort(t testing.TB, hosts ...string) int {
	t.Helper()
	port, err := freeport.Port(hosts...)
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return port
}

// StartHTTP serves "hello from <name>\n" on host:port until the test ends: a compute node
// with something listening on the offloaded pod's port.
func StartHTTP(t testing.TB, host string, port int, name string) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("sshtest: compute node %s: %v", name, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", name)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// Require fails the test, naming the tool and how to get it, when one of tools is not
// installed: these tests run the real thing. Under `go test -short` (`make unit`, the pure
// tests alone) it skips the test instead, saying which tools it runs; `make test` never passes
// -short, so there every such test runs.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: this test runs %s for real; make test runs it", strings.Join(tools, ", "))
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join("/usr/sbin", tool)); err == nil {
			continue
		}
		t.Fatalf("%s is not installed; these tests run it for real: run `make deps` (hack/test-deps.sh) as root, or install it from Debian's packages", tool)
	}
}

// Keygen writes a fresh ed25519 key pair without passphrase to file and file.pub.
func Keygen(t testing.TB, file string) {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sshtest", "-f", file).CombinedOutput()
	if err != nil {
		t.Fatalf("sshtest: ssh-keygen: %v\n%s", err, out)
	}
}

// ReadFile returns a file's content, failing the test when it cannot be read.
func ReadFile(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func writeFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}
