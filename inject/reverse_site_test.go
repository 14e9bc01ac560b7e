package inject

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/internal/syncbuf"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// The reverse tunnel's tests run the rendered pre-exec snippet and the rendered ssh-reverse
// container against real OpenSSH on loopback: an sshd as the login node, another as the
// compute node reached from it, a TCP echo service standing for a cluster Service, and two
// throwaway non-root accounts, the job's user and another user of the node. Login and compute
// node are one machine, so the job's relay is where a command on the "node" looks for it.

const (
	jobUser   = "sgrevjob"
	otherUser = "sgrevother"
	jobUID    = "7d1c8e52-2a0f-4b7e-9c1d-3e5f6a7b8c9d"
)

// account is a local user the tests run processes as.
type account struct {
	name     string
	uid, gid uint32
	home     string
}

var (
	accountsOnce sync.Once
	accountsErr  error
)

// newAccount returns a local user of the tests. On first use it creates both (with useradd,
// as root), with the password "*": no password logs in, yet sshd does not take the account
// for a locked one, as it would with useradd's "!".
func newAccount(t testing.TB, name string) account {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the reverse tunnel tests create the users %s and %s and run the job as them: run them as root", jobUser, otherUser)
	}
	accountsOnce.Do(func() {
		for _, n := range []string{jobUser, otherUser} {
			args := []string{"-p", "*", n}
			tool := "usermod"
			if _, err := user.Lookup(n); err != nil {
				tool, args = "useradd", append([]string{"--create-home", "--shell", "/bin/sh"}, args...)
			}
			if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
				accountsErr = fmt.Errorf("%s %s: %v\n%s", tool, n, err, out)
				return
			}
		}
	})
	if accountsErr != nil {
		t.Fatal(accountsErr)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return account{name: name, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}
}

// sharedDir is a directory every account can use, like /tmp: mode 1777, removed after the test.
func sharedDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sgrev-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type reverseOptions struct {
	sshd, nodeExec string
	exec           bool // ForwardMode exec, with a login node that refuses TCP forwarding
	socks          bool
	nodeConfig     []string // lines for the compute node's sshd_config
	slurmDiscovery bool     // NodeDiscovery slurm (with NodeExec srun), else configmap
	// bastion puts a second sshd in front of the login node, as SSH.Bastion, which lets the
	// job's key in and opens channels to the login sshd alone; its host key is pinned beside
	// the others.
	bastion bool
	// bench puts a benchServer (pathbench_test.go) where the echo service is, as the cluster
	// Service of the first forward.
	bench bool
}

// reverseSite is one login node, one compute node, an echo service and a pod with a reverse
// forward to it, mutated and rendered as the webhook would.
type reverseSite struct {
	job, other account
	login      *sshtest.Server
	bastion    *sshtest.Server // with reverseOptions.bastion
	node       *sshtest.Server
	authorized string // the authorized_keys of the job's account on every node
	echo       string // the echo service's address (with reverseOptions.bench, the benchServer's)
	listen     int    // the job's port for it
	second     int    // the job's port for the second forward, to the name "echo"
	socks      int
	bind       string
	pod        *corev1.Pod
	shadow     *Shadow
	mounts     map[string]string
	root       string // the socket directory root the plugin gives the job, empty for none
	tmp        string // the job's TMPDIR, node-local
	nodeName   string // what the virtual kubelet publishes
	nodePort   int    // the node sshd's port, as the shadow is told it
	slurm      *slurm // with NodeExec srun
	discovery  bool   // the node is asked of Slurm (NodeDiscovery slurm)
}

func newReverseSite(t testing.TB, opt reverseOptions) *reverseSite {
	t.Helper()
	sshtest.Require(t, "ssh", "ssh-keygen", "socat", "python3", "useradd")
	s := &reverseSite{job: newAccount(t, jobUser), other: newAccount(t, otherUser), root: sharedDir(t)}
	s.tmp = s.root

	// One key for the job's account on both nodes, in an authorized_keys file that sshd can
	// read as that user.
	keys := sharedDir(t)
	key := filepath.Join(keys, "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	s.authorized = filepath.Join(keys, "authorized_keys")
	copyFile(t, key+".pub", s.authorized, 0o644)

	nodeConfig := append([]string{"AuthorizedKeysFile " + s.authorized}, opt.nodeConfig...)
	if opt.nodeExec == policy.NodeExecSrun {
		// srun carries the session to the node's sshd on the batch host's loopback, where
		// this one listens too, on a port of its own.
		s.nodePort = sshtest.FreePort(t, "127.0.0.1")
		nodeConfig = append(nodeConfig, "ListenAddress 127.0.0.1:"+strconv.Itoa(s.nodePort))
	}
	s.node = sshtest.StartNodeSSHD(t, nodeConfig...)
	s.nodeName = s.node.Host
	nodeKnownHosts := sshtest.ReadFile(t, s.node.KnownHosts)
	loginEnv := "SetEnv PATH=/usr/bin:/bin"
	if opt.nodeExec == policy.NodeExecSrun {
		s.slurm = startSlurm(t)
		s.nodeName = slurmNode
		loginEnv += " SLURM_CONF=" + s.slurm.conf
		// The node's host key is checked under the name the virtual kubelet publishes, which
		// resolves nowhere: nothing but srun can carry the session there.
		nodeKnownHosts = strings.Replace(nodeKnownHosts, fmt.Sprintf("[%s]:%d", s.node.Host, s.node.Port),
			fmt.Sprintf("[%s]:%d", slurmNode, s.nodePort), 1)
		if opt.slurmDiscovery {
			// Asked of Slurm, the node is the address Slurm reaches it at, its NodeAddr; the
			// node file holds a name no host key is listed under, which nobody must read.
			nodeKnownHosts = strings.Replace(nodeKnownHosts, "["+slurmNode+"]", "["+s.slurm.nodeAddr+"]", 1)
			s.nodeName = "decoy.invalid"
			s.discovery = true
		}
	} else {
		s.nodePort = s.node.Port
	}
	loginConfig := []string{"AuthorizedKeysFile " + s.authorized, loginEnv}
	discovery := policy.NodeDiscoveryConfigMap
	if opt.slurmDiscovery {
		discovery = policy.NodeDiscoverySlurm
	}
	forwardMode := policy.ForwardModePortForward
	if opt.exec {
		loginConfig = append(loginConfig, "AllowTcpForwarding no")
		forwardMode = policy.ForwardModeExec
	}
	s.login = sshtest.StartSSHD(t, loginConfig...)
	bastion, bastionHosts := "", ""
	if opt.bastion {
		s.bastion = sshtest.StartSSHD(t, "AuthorizedKeysFile "+s.authorized, fmt.Sprintf("PermitOpen %s:%d", s.login.Host, s.login.Port), "ForceCommand /bin/false")
		bastion = fmt.Sprintf("\nBastion: {Host: %s, Port: %d}", s.bastion.Host, s.bastion.Port)
		bastionHosts = sshtest.ReadFile(t, s.bastion.KnownHosts)
	}

	if opt.bench {
		host := sshtest.Loopback(t)
		s.echo = net.JoinHostPort(host, strconv.Itoa(startBenchServer(t, host, 0).Port()))
	} else {
		s.echo = startEcho(t)
	}
	s.listen = sshtest.FreePort(t, "127.0.0.1")
	// The second forward gives /etc/hosts a name to map; nothing answers for it in this cluster.
	s.second = sshtest.FreePort(t, "127.0.0.1")
	forwards := fmt.Sprintf("%d:%s echo:%d", s.listen, s.echo, s.second)
	socks := ""
	if opt.socks {
		s.socks = sshtest.FreePort(t, "0.0.0.0") // free on the wildcard address, so on 127.0.0.1 too
		socks = fmt.Sprintf("interlink.eu/reverse-socks-port: %q", strconv.Itoa(s.socks))
	}
	doc := loginPolicy(s.login, jobUser, fmt.Sprintf("KnownHostsConfigMap: site-known-hosts\nForwardMode: %s\nNodeDiscovery: %s\n"+
		"Reverse: {Enabled: true, AllowedDestinations: {CIDRs: [127.0.0.0/8]}, AllowSocks: %t, Sshd: %s, NodeExec: %s}%s", forwardMode, discovery, opt.socks, opt.sshd, opt.nodeExec, bastion))
	s.pod = offloadedPod("trainer", "user")
	s.pod.UID = jobUID
	s.pod.Annotations = map[string]string{validate.AnnotationReverseForwards: forwards}
	if socks != "" {
		s.pod.Annotations[validate.AnnotationReverseSocksPort] = strconv.Itoa(s.socks)
	}
	o, _ := validate.Pod(s.pod, validate.Config{Policy: mustPolicy(t, doc)})
	if w := mutateInPlace(s.pod, o); len(w) > 0 {
		t.Fatalf("MutatePod warned: %v", w)
	}
	s.bind = s.pod.Annotations[validate.AnnotationReverseBind]
	s.shadow, _ = render(t, doc, s.pod)

	s.mounts = map[string]string{nodeDir: t.TempDir(), stateDir: t.TempDir(), keyDir: t.TempDir(), knownHostsDir: t.TempDir()}
	copyFile(t, key, filepath.Join(s.mounts[keyDir], keyFile), 0o400)
	hosts := sshtest.ReadFile(t, s.login.KnownHosts) + nodeKnownHosts + bastionHosts
	writeAtomically(t, filepath.Join(s.mounts[knownHostsDir], knownHostsKey), hosts)
	writeAtomically(t, filepath.Join(s.mounts[nodeDir], validate.ComputeNodeKey), s.nodeName)
	return s
}

// dir is the job's socket directory: under the plugin's root, or without one under the job
// user's own root in TMPDIR.
func (s *reverseSite) dir() string { return filepath.Join(s.socketRoot(), "il-rev-"+s.bind) }

// socketRoot is the root of the job's socket directory.
func (s *reverseSite) socketRoot() string {
	if s.root == "" {
		return filepath.Join(s.tmp, fmt.Sprintf("interlink-%d", s.job.uid))
	}
	return s.root
}

// socket is the socket in dir that the session forwards a listen port to.
func (s *reverseSite) socket(port int) string {
	return filepath.Join(s.dir(), "rev-"+strconv.Itoa(port)+".sock")
}

// jobEnv is what the plugin gives the job: the socket directory root (none where root is
// empty, as interLink's Slurm plugin gives by default), a node-local TMPDIR, and a wait short
// enough for a test.
func (s *reverseSite) jobEnv(env ...string) []string {
	plugin := []string{"TMPDIR=" + s.tmp, "SHADOW_REVERSE_WAIT=60"}
	if s.root != "" {
		plugin = append(plugin, "INTERLINK_SOCKET_DIR_ROOT="+s.root)
	}
	return append(plugin, env...)
}

// jobScript is the pod's pre-exec followed by a workload that reports its environment and
// stays, as the job's shell does.
func (s *reverseSite) jobScript() string {
	return s.pod.Annotations[validate.AnnotationPreExec] + "echo workload started; env; sleep 600\n"
}

// jobRun is the job as the tests see it: a shell of the job's user, or a Slurm batch job.
type jobRun interface {
	running() bool
	output() string
}

type shellJob struct{ *process }

func (j shellJob) output() string { return j.out.String() }

// startJob runs the job in a shell of the job's user.
func (s *reverseSite) startJob(t testing.TB, env ...string) shellJob {
	t.Helper()
	return shellJob{startAs(t, s.job, s.jobEnv(env...), "sh", "-c", s.jobScript())}
}

// runJob runs the job as the site would: a Slurm batch job named after the pod's UID with
// NodeExec srun, else a shell.
func (s *reverseSite) runJob(t testing.TB) jobRun {
	t.Helper()
	if s.slurm == nil {
		return s.startJob(t)
	}
	return s.slurm.submit(t, s.job, jobUID, s.jobScript(), s.jobEnv())
}

// startShadow runs the rendered ssh-reverse container.
func (s *reverseSite) startShadow(t testing.TB) *process {
	t.Helper()
	if s.discovery {
		// As in the shadow pod, wait-for-node holds ssh-reverse back until Slurm runs the job.
		wait := runContainer(t, container(t, s.shadow.Deployment, containerWaitForNode), s.mounts, "SHADOW_POLL_INTERVAL=0.2", slurmPollEnv)
		if code := wait.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("wait-for-node exited %d:\n%s", code, wait.out)
		}
	}
	return runContainer(t, container(t, s.shadow.Deployment, ContainerReverse), s.mounts,
		"SHADOW_POLL_INTERVAL=0.2", slurmPollEnv, "SHADOW_REVERSE_NODE_PORT="+strconv.Itoa(s.nodePort), "HOME="+t.TempDir())
}

// waitReady waits until the job's pre-exec has let the workload start.
func (s *reverseSite) waitReady(t testing.TB, job jobRun) {
	t.Helper()
	eventually(t, 45*time.Second, func() error {
		if !job.running() {
			return fmt.Errorf("the job ended before its workload started:\n%s", job.output())
		}
		if !strings.Contains(job.output(), "workload started") {
			return fmt.Errorf("the workload has not started")
		}
		return nil
	})
}

// startTunnel starts a job and its shadow and waits until the job's workload has started.
func (s *reverseSite) startTunnel(t testing.TB) (shellJob, *process) {
	t.Helper()
	job := s.startJob(t)
	shadow := s.startShadow(t)
	s.waitReady(t, job)
	return job, shadow
}

// startAs starts a process as acct in a process group of its own, stopped with the test.
func startAs(t testing.TB, acct account, env []string, name string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(name, args...), out: &syncbuf.Buffer{}, exited: make(chan struct{})}
	p.cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + acct.home, "LANG=C"}, env...)
	p.cmd.Dir = "/"
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: acct.uid, Gid: acct.gid}}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s as %s: %v", name, acct.name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		if t.Failed() {
			t.Logf("%s as %s:\n%s", name, acct.name, p.out)
		}
	})
	return p
}

// dialAs sends a line through addr with socat running as acct and returns what came back.
// socat waits up to -t for the answer once its input ends (half a second by default, too
// short for a relay, an sshd and an ssh under load); it returns as soon as the peer closes.
func dialAs(t *testing.T, acct account, addr string) string {
	t.Helper()
	cmd := exec.Command("socat", "-t", "10", "-T", "10", "-", addr)
	cmd.Stdin = strings.NewReader("ping\n")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: acct.uid, Gid: acct.gid}}
	out, _ := cmd.Output()
	return string(out)
}

// runAs runs a command as acct to its end, failing the test if it fails.
func runAs(t *testing.T, acct account, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: acct.uid, Gid: acct.gid}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s as %s: %v\n%s", name, acct.name, err, out)
	}
}

// startEcho serves a TCP echo on a fresh loopback address: the cluster Service.
func startEcho(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", sshtest.Loopback(t)+":0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}
