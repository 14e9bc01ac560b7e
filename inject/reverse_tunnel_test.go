package inject

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

func TestReverseTunnelCarriesTheJobsConnectionsIntoTheCluster(t *testing.T) {
	for name, opt := range map[string]reverseOptions{
		"the node's sshd, reached through the checked node hop":                                  {sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH},
		"a user-space sshd started through the node hop":                                         {sshd: policy.SshdUserspace, nodeExec: policy.NodeExecSSH},
		"a user-space sshd started with srun in a real Slurm job":                                {sshd: policy.SshdUserspace, nodeExec: policy.NodeExecSrun},
		"the node's sshd, reached through srun in a real Slurm job":                              {sshd: policy.SshdNode, nodeExec: policy.NodeExecSrun},
		"the node's sshd through srun, the node found by asking Slurm":                           {sshd: policy.SshdNode, nodeExec: policy.NodeExecSrun, slurmDiscovery: true},
		"the node's sshd through a login node without TCP forwarding (exec mode)":                {sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH, exec: true},
		"the node's sshd through the checked node hop, the login node behind a bastion":          {sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH, bastion: true},
		"the node's sshd through srun, the node asked of Slurm, the login node behind a bastion": {sshd: policy.SshdNode, nodeExec: policy.NodeExecSrun, slurmDiscovery: true, bastion: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newReverseSite(t, opt)
			job := s.runJob(t)
			shadow := s.startShadow(t)
			s.waitReady(t, job)

			addr := net.JoinHostPort(s.bind, strconv.Itoa(s.listen))
			if got := dialAs(t, s.job, "TCP4:"+addr); got != "ping\n" {
				t.Errorf("the job's user got %q through %s, want the echo", got, addr)
			}
			if got := dialAs(t, s.job, "TCP6:[::ffff:"+s.bind+"]:"+strconv.Itoa(s.listen)); got != "ping\n" {
				t.Errorf("the job's user on an IPv6 socket (v4-mapped) got %q, want the echo", got)
			}
			if got := dialAs(t, s.other, "TCP4:"+addr); got != "" {
				t.Errorf("another user of the node got %q through the job's tunnel", got)
			}
			// The relay's line reaches the job's log through the job's output pipe, copied
			// on its own goroutine, so it may trail the other user's closed dial a moment.
			want := fmt.Sprintf("refused a connection to port %d from uid %d", s.listen, s.other.uid)
			eventually(t, 10*time.Second, func() error {
				if !strings.Contains(job.output(), want) {
					return fmt.Errorf("the job's log lacks %q", want)
				}
				return nil
			})
			if strings.Contains(shadow.out.String(), "could not prepare") {
				t.Errorf("the shadow could not prepare the node:\n%s", shadow.out)
			}
			if want := "interLink: the reverse tunnel's socket directory is under " + s.root + ", from INTERLINK_SOCKET_DIR_ROOT"; !strings.Contains(job.output(), want) {
				t.Errorf("the job's log lacks %q:\n%s", want, job.output())
			}
			if _, err := os.Stat(s.socket(s.listen)); err != nil {
				t.Errorf("the forward's socket is not in the directory under the plugin's root: %v", err)
			}
			if opt.bastion && !strings.Contains(s.bastion.Log(), "Accepted publickey for "+jobUser) {
				t.Errorf("the bastion's log shows no login of %s:\n%s", jobUser, s.bastion.Log())
			}
		})
	}
}

func TestReverseTunnelSocketsAreTheJobUsersOnly(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	s.startTunnel(t)
	// Go writes a socket's mode with S where ls shows s: srw------- and drwx------.
	for path, want := range map[string]string{
		s.dir():            "drwx------",
		s.socket(s.listen): "Srw-------",
		s.socket(s.second): "Srw-------",
	} {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().String(); got != want {
			t.Errorf("%s is %s, want %s", path, got, want)
		}
		if uid := info.Sys().(*syscall.Stat_t).Uid; uid != s.job.uid {
			t.Errorf("%s belongs to uid %d, want the job's user %d", path, uid, s.job.uid)
		}
	}
}

func TestReverseTunnelMapsTheNamesForTheContainer(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	job := s.startJob(t, "SINGULARITY_BIND=/data")
	s.startShadow(t)
	s.waitReady(t, job)
	// The workload prints its environment after the snippet says it is ready: wait for it.
	env := map[string]string{}
	eventually(t, 10*time.Second, func() error {
		for _, line := range strings.Split(job.out.String(), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		_, singularity := env["SINGULARITY_BIND"]
		if _, apptainer := env["APPTAINER_BIND"]; !singularity || !apptainer {
			return fmt.Errorf("the workload has not printed its environment")
		}
		return nil
	})
	hosts, ok := strings.CutSuffix(env["APPTAINER_BIND"], ":/etc/hosts")
	if !ok || !strings.HasPrefix(hosts, "/data,"+s.root+"/il-rev-hosts.") {
		t.Fatalf("APPTAINER_BIND=%q, want the job's /data, then a copy of /etc/hosts in its TMPDIR", env["APPTAINER_BIND"])
	}
	hosts = strings.TrimPrefix(hosts, "/data,")
	if env["SINGULARITY_BIND"] != "/data,"+hosts+":/etc/hosts" {
		t.Errorf("SINGULARITY_BIND=%q", env["SINGULARITY_BIND"])
	}
	// The mapping comes first: the resolver takes the first line naming a host, so an entry
	// /etc/hosts already has for a forwarded name would otherwise win.
	if text, want := sshtest.ReadFile(t, hosts), s.bind+" echo\n"+sshtest.ReadFile(t, "/etc/hosts"); text != want {
		t.Errorf("%s is not %q followed by /etc/hosts:\n%s", hosts, s.bind+" echo", text)
	}
}

func TestReverseTunnelFollowsTheJobToAnotherNode(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	// The job's relay is on this machine whatever the node is called, so a second sshd
	// stands for the node a requeued job lands on. It listens on the first one's port too,
	// the one port the shadow was started with. It starts before the shadow, so it stops
	// after it: sshd's sessions hold its log open while their client lives.
	node11 := sshtest.NodeAddress(t)
	port := strconv.Itoa(s.node.Port)
	moved := sshtest.StartSSHD(t, "AuthorizedKeysFile "+s.authorized, "ListenAddress "+node11+":"+port)
	known := strings.Replace(sshtest.ReadFile(t, moved.KnownHosts), fmt.Sprintf("[%s]:%d", moved.Host, moved.Port), "["+node11+"]:"+port, 1)
	knownHosts := filepath.Join(s.mounts[knownHostsDir], knownHostsKey)
	writeAtomically(t, knownHosts, sshtest.ReadFile(t, knownHosts)+known)

	_, shadow := s.startTunnel(t)
	writeAtomically(t, filepath.Join(s.mounts[nodeDir], validate.ComputeNodeKey), node11)
	eventually(t, 10*time.Second, func() error {
		if !strings.Contains(moved.Log(), "Accepted publickey for "+jobUser) {
			return fmt.Errorf("the shadow has not logged in to the new node")
		}
		return nil
	})
	// The shadow's output reaches shadow.out through a pipe copied on its own goroutine, and
	// the new node's sshd logs through another: the shadow's line may trail sshd's a moment.
	want := "compute node changed from " + s.node.Host + " to " + node11 + ", rebuilding the reverse tunnel"
	eventually(t, 10*time.Second, func() error {
		if !strings.Contains(shadow.out.String(), want) {
			return fmt.Errorf("the shadow's log lacks %q", want)
		}
		return nil
	})
	addr := net.JoinHostPort(s.bind, strconv.Itoa(s.listen))
	eventually(t, 10*time.Second, func() error {
		if got := dialAs(t, s.job, "TCP4:"+addr); got != "ping\n" {
			return fmt.Errorf("through the rebuilt tunnel: %q", got)
		}
		return nil
	})
}

func TestReverseTunnelRelayStopsWithTheJobsShell(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	job, shadow := s.startTunnel(t)
	if err := job.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if _, err := os.Stat(s.dir()); err == nil {
			return fmt.Errorf("%s is still there", s.dir())
		}
		if !strings.Contains(shadow.out.String(), "the reverse tunnel session on "+s.node.Host+" ended") {
			return fmt.Errorf("the shadow has not seen its session end")
		}
		return nil
	})
}

func TestReverseTunnelEndsWithTheSocketDirectory(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	job, shadow := s.startTunnel(t)
	// A relay is rev-relay.py run in its directory; its command line, which every user of the
	// node can read, names nothing of the tunnel: no directory, address or port.
	dir, err := filepath.EvalSymlinks(s.dir())
	if err != nil {
		t.Fatal(err)
	}
	relays := func() (n int, cmdlines []string) {
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			data, err := os.ReadFile(p + "/cmdline")
			if err != nil || !strings.Contains(string(data), "rev-relay.py") {
				continue
			}
			// Once the directory is removed, a relay still running in it shows it "(deleted)".
			if cwd, err := os.Readlink(p + "/cwd"); err == nil && (cwd == dir || cwd == dir+" (deleted)") {
				n++
				cmdlines = append(cmdlines, strings.Join(strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")[1:], " "))
			}
		}
		return n, cmdlines
	}
	if n, cmdlines := relays(); n != 1 {
		t.Fatalf("want one relay for %s, found %d: %q", s.dir(), n, cmdlines)
	} else if cmdlines[0] != "-I rev-relay.py serve" {
		t.Errorf("the relay's command line, readable by every user of the node, is %q: want only \"-I rev-relay.py serve\"", cmdlines[0])
	}
	if err := os.RemoveAll(s.dir()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if n, _ := relays(); n != 0 {
			return fmt.Errorf("%d relays still run", n)
		}
		if !strings.Contains(shadow.out.String(), "the reverse tunnel session on "+s.node.Host+" ended") {
			return fmt.Errorf("the shadow has not seen its session end")
		}
		return nil
	})
	// The relay's line reaches job.out through the job's output pipe, copied on its own
	// goroutine, so it may trail the relay's exit a moment.
	eventually(t, 10*time.Second, func() error {
		if !strings.Contains(job.out.String(), s.dir()+" is gone; stopping the relay") {
			return fmt.Errorf("the relay did not say why it stopped:\n%s", job.out)
		}
		return nil
	})
}

func TestReverseTunnelPortTakenFailsTheJob(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	l, err := net.Listen("tcp", net.JoinHostPort(s.bind, strconv.Itoa(s.listen)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	job := s.startJob(t)
	job.expectFailure(t, 10*time.Second, fmt.Sprintf("the job went on with %s:%d taken", s.bind, s.listen),
		fmt.Sprintf("cannot listen on %s:%d: Address already in use", s.bind, s.listen),
		"the reverse tunnel's relay did not start")
	if strings.Contains(job.out.String(), "workload started") {
		t.Errorf("the workload started")
	}
}

func TestReverseTunnelSocks(t *testing.T) {
	t.Run("an allowed proxy reaches the cluster by address", func(t *testing.T) {
		t.Parallel()
		s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH, socks: true})
		_, shadow := s.startTunnel(t)
		if got := socksEcho(t, s.socks, s.echo); got != "ping\n" {
			t.Errorf("through the SOCKS proxy: %q", got)
		}
		// The shadow's output reaches shadow.out through a pipe copied on its own goroutine,
		// so read it once the line has had time to arrive rather than at once.
		eventually(t, 10*time.Second, func() error {
			if !strings.Contains(shadow.out.String(), "WARNING: pod asks for a SOCKS5 proxy") {
				return fmt.Errorf("the shadow's log has no WARNING line")
			}
			return nil
		})
	})
	t.Run("a wildcard listener (GatewayPorts yes) makes the job refuse", func(t *testing.T) {
		t.Parallel()
		s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH, socks: true,
			nodeConfig: []string{"GatewayPorts yes"}})
		job := s.startJob(t)
		s.startShadow(t)
		job.expectFailure(t, 20*time.Second, "the job went on with its proxy open to other machines", "the node's sshd sets GatewayPorts yes")
	})
}

// interLink's Slurm plugin exports no INTERLINK_SOCKET_DIR_ROOT unless its CommandPrefix does:
// the job then keeps its sockets in a directory of its user's own under TMPDIR, and says so.
func TestReverseTunnelWithoutASocketDirectoryRoot(t *testing.T) {
	for name, opt := range map[string]reverseOptions{
		"in a shell, through the checked node hop":                  {sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH},
		"in a real Slurm job, the node's sshd reached through srun": {sshd: policy.SshdNode, nodeExec: policy.NodeExecSrun},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newReverseSite(t, opt)
			s.root = ""
			job := s.runJob(t)
			s.startShadow(t)
			s.waitReady(t, job)

			s.expectEcho(t)
			addr := net.JoinHostPort(s.bind, strconv.Itoa(s.listen))
			if got := dialAs(t, s.other, "TCP4:"+addr); got != "" {
				t.Errorf("another user of the node got %q through the job's tunnel", got)
			}
			want := fmt.Sprintf("interLink: INTERLINK_SOCKET_DIR_ROOT is not set, so the reverse tunnel's socket directory is under %s, a drwx------ directory of %s on this node\n", s.socketRoot(), jobUser)
			if !strings.Contains(job.output(), want) {
				t.Errorf("the job's log lacks %q:\n%s", want, job.output())
			}
			if _, err := os.Stat(s.socket(s.listen)); err != nil {
				t.Errorf("the forward's socket is not in the job user's own directory: %v", err)
			}
			assertOwnedDirectory(t, s.socketRoot(), s.job.uid)
		})
	}
}

// A co-tenant of the node who makes the path of the job user's own socket directory root
// first, as a directory of theirs or as a symbolic link to one of the job user's, is refused:
// the job stops before its workload, naming the path, and writes nothing there.
func TestReverseTunnelRefusesACoTenantsSocketDirectoryRoot(t *testing.T) {
	for name, plant := range map[string]func(t *testing.T, s *reverseSite) string{
		"a directory of another user": func(t *testing.T, s *reverseSite) string {
			runAs(t, s.other, "mkdir", "-m", "777", s.socketRoot())
			return "belongs to another user, not a directory of " + jobUser + "'s own"
		},
		"a symbolic link to a directory of the job user's": func(t *testing.T, s *reverseSite) string {
			target := filepath.Join(sharedDir(t), "target")
			runAs(t, s.job, "mkdir", "-m", "700", target)
			runAs(t, s.other, "ln", "-s", target, s.socketRoot())
			return "is a symbolic link, not a directory of " + jobUser + "'s own"
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
			s.root = ""
			says := plant(t, s)
			job := s.startJob(t)
			job.expectFailure(t, 15*time.Second, "the job went on with a socket directory root someone else made",
				"interLink: INTERLINK_SOCKET_DIR_ROOT is not set, and "+s.socketRoot()+", where the reverse tunnel's sockets go without it, "+says,
				"CommandPrefix: export INTERLINK_SOCKET_DIR_ROOT=")
			if strings.Contains(job.out.String(), "workload started") {
				t.Errorf("the workload started:\n%s", job.out)
			}
			if entries, _ := os.ReadDir(s.socketRoot()); len(entries) > 0 {
				t.Errorf("the job wrote into %s: %v", s.socketRoot(), entries)
			}
		})
	}
}

// assertOwnedDirectory checks that dir is a directory, not a symbolic link, of uid alone.
func assertOwnedDirectory(t *testing.T, dir string, uid uint32) {
	t.Helper()
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 || st == nil || st.Uid != uid {
		t.Errorf("%s is %v, owned by uid %v, want a drwx------ directory of uid %d", dir, fi.Mode(), st.Uid, uid)
	}
}

func TestReverseTunnelGivesUpAfterItsWait(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	job := s.startJob(t, "SHADOW_REVERSE_WAIT=2")
	job.expectFailure(t, 10*time.Second, "the job went on without its tunnel",
		"interLink: the reverse tunnel did not come up within 2s", "kubectl logs <shadow pod> -c ssh-reverse")
}

// socksEcho sends a line to target through the SOCKS5 proxy on 127.0.0.1:port.
func socksEcho(t *testing.T, port int, target string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	host, portStr, _ := net.SplitHostPort(target)
	p, _ := strconv.Atoi(portStr)
	ip := net.ParseIP(host).To4()
	req := append([]byte{5, 1, 0}, 5, 1, 0, 1)
	req = append(append(req, ip...), byte(p>>8), byte(p))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 12) // method choice, then a CONNECT reply with an IPv4 address
	if _, err := io.ReadFull(c, reply); err != nil || reply[1] != 0 || reply[3] != 0 {
		t.Fatalf("SOCKS5 handshake: %v %v", reply, err)
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	n, _ := io.ReadFull(c, buf)
	return string(buf[:n])
}
