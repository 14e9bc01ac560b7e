package harness

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/interlink-hq/shadowgate/internal/freeport"
	"github.com/interlink-hq/shadowgate/internal/slurmconf"
)

// The site's Unix accounts: the HPC account the shadows log in as and the jobs run as, and
// another user of the same machines, who must not reach what the account's jobs keep
// private.
const (
	SiteAccount = "sgsite"
	OtherUser   = "sgsiteother"
)

// ComputeNodeName is the site's one Slurm node.
const ComputeNodeName = "sgcompute"

// Site is a whole interLink site on this machine: the HPC side (munged, slurmctld, a slurmd
// in a network namespace of its own, the login nodes' sshd) and the cluster's nodes, which
// StartSite starts against a control plane from StartCluster.
//
// The compute node is a host of its own: a network namespace joined to this machine by a veth
// pair, so a job listens on the same port as the shadow that forwards to it, as on a real
// site, and the login node reaches the compute node's address the cluster does not use. The
// login nodes listen on this machine's end of that pair, each on a port of its own, an address
// the cluster's pods reach through their node as they would a site's login node; nothing
// leaves the machine.
type Site struct {
	Dir string
	// Account and Other are SiteAccount and OtherUser.
	Account, Other *user.User
	// Key is the account's private key (the site key the shadows log in with); Logins are
	// the login nodes, by name.
	Key    string
	Logins map[string]*LoginNode
	// ComputeAddress is the compute node's address (Slurm's NodeAddr); SecondComputeAddress is
	// another address of the same node, for MoveComputeNode.
	ComputeAddress, SecondComputeAddress string
	// SlurmConf is SLURM_CONF for every Slurm client.
	SlurmConf string
	// KDC is the site's Kerberos realm, which Kerberos login nodes accept tickets of.
	KDC *KDC

	netns   string
	procs   []*process
	hostEnd string
}

// LoginNode is one login node: sshd on a port of its own at this machine's end of the compute
// node's veth pair, as root, letting the site's accounts in with their keys.
type LoginNode struct {
	Name       string
	Host       string
	Port       int
	KnownHosts string // the known_hosts line of its host key, for [Host]:Port
	Forwarding bool   // AllowTcpForwarding
	Log        string

	// argv starts its sshd again (StartLogin); proc is the latest sshd started.
	argv []string
	proc *process
}

// SiteLogin describes a login node to start.
type SiteLogin struct {
	Name string
	// NoForwarding sets AllowTcpForwarding no, as at sites (SURF) that allow sessions but no
	// port forwarding: portforward shadows fail there and exec shadows work.
	NoForwarding bool
	// Kerberos lets the account in with a ticket of the site's realm (GSSAPI) and with no key.
	Kerberos bool
}

// StartSite starts the HPC side of the site under dir: the accounts (created with useradd
// when missing), munged, slurmctld, the compute node's namespace and its slurmd, and the
// login nodes. It needs root. Stop undoes all of it.
func StartSite(dir string, logins ...SiteLogin) (_ *Site, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the local site creates Unix accounts, a network namespace and runs sshd and Slurm as root: run it as root")
	}
	for _, tool := range []string{"ip", "nsenter", "munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "/usr/sbin/sshd",
		"ssh-keygen", "useradd", "nc", "krb5kdc", "kdb5_util", "kadmin.local", "kinit"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("the local site needs %s (hack/test-deps.sh installs it): %w", tool, err)
		}
	}
	s := &Site{Dir: dir, Logins: map[string]*LoginNode{}}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if err := searchableByAll(dir); err != nil {
		return nil, err
	}
	if s.Account, err = ensureUser(SiteAccount); err != nil {
		return nil, err
	}
	if s.Other, err = ensureUser(OtherUser); err != nil {
		return nil, err
	}
	if err := s.startComputeNetwork(); err != nil {
		return nil, err
	}
	if err := s.startSlurm(); err != nil {
		return nil, err
	}
	if err := s.writeAccountKey(); err != nil {
		return nil, err
	}
	if err := s.startKDC(); err != nil {
		return nil, err
	}
	for _, l := range logins {
		if err := s.startLogin(l); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// searchableByAll checks every directory above dir lets other users through: sshd reads the
// account's authorized_keys, and the jobs their scripts, as the account.
func searchableByAll(dir string) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("the site's directory %s is under %s (mode %v), which the site's accounts cannot enter: make it searchable (chmod o+x) or put the site elsewhere", dir, d, info.Mode().Perm())
		}
		if d == "/" {
			return nil
		}
	}
}

// ensureUser returns the local user name, created with a home and the password "*" when
// missing: no password logs in, yet sshd does not take the account for a locked one, as it
// would with useradd's "!".
func ensureUser(name string) (*user.User, error) {
	if u, err := user.Lookup(name); err == nil {
		return u, nil
	}
	if out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/sh", "-p", "*", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("useradd %s: %v\n%s", name, err, out)
	}
	return user.Lookup(name)
}

// startComputeNetwork makes the compute node's network namespace and the veth pair joining it
// to this machine, on a /29 of 10.213.0.0/16 chosen at random so two sites do not collide:
// this machine's end is .1, the compute node has .2 and .3.
func (s *Site) startComputeNetwork() error {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<14))
	if err != nil {
		return err
	}
	k := int(n.Int64()) * 8 % (1 << 16)
	s.netns = fmt.Sprintf("sg-compute-%d", k)
	s.hostEnd = fmt.Sprintf("10.213.%d.%d", k/256, k%256+1)
	s.ComputeAddress = fmt.Sprintf("10.213.%d.%d", k/256, k%256+2)
	s.SecondComputeAddress = fmt.Sprintf("10.213.%d.%d", k/256, k%256+3)
	hostIf, nodeIf := fmt.Sprintf("sgh%d", k), fmt.Sprintf("sgn%d", k)
	for _, args := range [][]string{
		{"netns", "add", s.netns},
		{"link", "add", hostIf, "type", "veth", "peer", "name", nodeIf, "netns", s.netns},
		{"addr", "add", s.hostEnd + "/29", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", s.netns, "addr", "add", s.ComputeAddress + "/29", "dev", nodeIf},
		{"-n", s.netns, "addr", "add", s.SecondComputeAddress + "/29", "dev", nodeIf},
		{"-n", s.netns, "link", "set", nodeIf, "up"},
		{"-n", s.netns, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// startSlurm starts munged and slurmctld on this machine (the login side) and slurmd in the
// compute node's namespace, and waits for the node to be idle.
func (s *Site) startSlurm() error {
	key := filepath.Join(s.Dir, "munge.key")
	secret := make([]byte, 1024)
	_, _ = rand.Read(secret)
	if err := os.WriteFile(key, secret, 0o400); err != nil {
		return err
	}
	socket := filepath.Join(s.Dir, "munge.sock")
	p, err := startProcess("munged", filepath.Join(s.Dir, "munged.log"), "munged", "-F", "-f", "--key-file="+key,
		"--socket="+socket, "--pid-file="+filepath.Join(s.Dir, "munged.pid"),
		"--seed-file="+filepath.Join(s.Dir, "munge.seed"), "--log-file="+filepath.Join(s.Dir, "munged.log"))
	if err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	if err := poll(p, 10*time.Second, func() error { _, err := os.Stat(socket); return err }); err != nil {
		return err
	}
	slurm := filepath.Join(s.Dir, "slurm")
	for _, d := range []string{"state", "spool"} {
		if err := os.MkdirAll(filepath.Join(slurm, d), 0o755); err != nil {
			return err
		}
	}
	ctldPort, err := freePort()
	if err != nil {
		return err
	}
	slurmdPort, err := freePort()
	if err != nil {
		return err
	}
	s.SlurmConf = filepath.Join(slurm, "slurm.conf")
	// slurmctld listens on every address of this machine; the compute node reaches it at the
	// host's end of the veth pair, clients here at the same address.
	conf := slurmconf.Cluster{Name: "shadowgate-site", Controller: s.hostEnd, CtldPort: ctldPort, SlurmdPort: slurmdPort,
		MungeSocket: socket, Dir: slurm, Node: ComputeNodeName, NodeAddr: s.ComputeAddress}.Render()
	if err := os.WriteFile(s.SlurmConf, []byte(conf), 0o644); err != nil {
		return err
	}
	if p, err = startProcess("slurmctld", filepath.Join(slurm, "slurmctld.out"), "slurmctld", "-D", "-i", "-f", s.SlurmConf); err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	// nsenter, not ip netns exec: that remounts /sys for the namespace, without the cgroup
	// filesystem slurmd needs.
	if p, err = startProcess("slurmd", filepath.Join(slurm, "slurmd.out"), "nsenter", "--net=/run/netns/"+s.netns,
		"slurmd", "-D", "-N", ComputeNodeName, "-f", s.SlurmConf); err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	return poll(p, 30*time.Second, func() error {
		out, err := s.Slurm("sinfo", "-h", "-n", ComputeNodeName, "-o", "%t").CombinedOutput()
		if state := strings.TrimSpace(string(out)); err != nil || state != "idle" {
			return fmt.Errorf("slurm node %s is %q (%v); see %s", ComputeNodeName, state, err, filepath.Join(slurm, "slurmd.log"))
		}
		return nil
	})
}

// MoveComputeNode makes Slurm reach the compute node at addr (NodeAddr), as when a site
// renumbers a node under running jobs.
func (s *Site) MoveComputeNode(addr string) error {
	if out, err := s.Slurm("scontrol", "update", "NodeName="+ComputeNodeName, "NodeAddr="+addr).CombinedOutput(); err != nil {
		return fmt.Errorf("scontrol update NodeAddr=%s: %v %s", addr, err, out)
	}
	return nil
}

// Slurm is a Slurm client command of the site.
func (s *Site) Slurm(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+s.SlurmConf)
	return cmd
}

// writeAccountKey makes the account's key pair (the site key the shadows log in with) and the
// authorized_keys every login node reads for it.
func (s *Site) writeAccountKey() error {
	keys := filepath.Join(s.Dir, "keys")
	if err := os.MkdirAll(keys, 0o755); err != nil {
		return err
	}
	s.Key = filepath.Join(keys, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", SiteAccount+"@site", "-f", s.Key).CombinedOutput(); err != nil {
		return fmt.Errorf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(s.Key + ".pub")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(keys, SiteAccount), pub, 0o644)
}

// startLogin starts a login node's sshd on a free port of this machine's end of the compute
// node's veth pair (reached by the cluster's pods through their node, unlike a loopback
// address, which is each pod's own) and waits for it to answer.
func (s *Site) startLogin(l SiteLogin) error {
	dir := filepath.Join(s.Dir, "login-"+l.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	n := &LoginNode{Name: l.Name, Forwarding: !l.NoForwarding, Log: filepath.Join(dir, "sshd.log")}
	n.Host = s.hostEnd
	var err error
	if n.Port, err = freeport.Port(n.Host); err != nil {
		return err
	}
	hostKey := filepath.Join(dir, "host_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey).CombinedOutput(); err != nil {
		return fmt.Errorf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return err
	}
	fields := strings.Fields(string(pub))
	n.KnownHosts = fmt.Sprintf("[%s]:%d %s %s", n.Host, n.Port, fields[0], fields[1])
	forwarding := "yes"
	if l.NoForwarding {
		forwarding = "no"
	}
	// sshd reads its host principal's key from KRB5_KTNAME; GSSAPIStrictAcceptorCheck would
	// want the machine's hostname in the principal, not the login node's address.
	auth, env := "PubkeyAuthentication yes\n", []string{}
	if l.Kerberos {
		keytab := filepath.Join(dir, "host.keytab")
		if err := s.KDC.addKeytab("host/"+n.Host+"@"+SiteRealm, keytab); err != nil {
			return err
		}
		auth = "PubkeyAuthentication no\nGSSAPIAuthentication yes\nGSSAPIStrictAcceptorCheck no\n"
		env = []string{"KRB5_KTNAME=" + keytab, "KRB5_CONFIG=" + s.KDC.Krb5Conf}
	}
	config := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`ListenAddress %s:%d
HostKey %s
PidFile %s
AuthorizedKeysFile %s/%%u
AllowUsers %s %s
AllowTcpForwarding %s
%sPasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The keys live under a temporary directory, which is world-writable.
StrictModes no
# Every session can ask this site's Slurm: the shadow's node discovery runs squeue here.
SetEnv SLURM_CONF=%s
LogLevel VERBOSE
`, n.Host, n.Port, hostKey, filepath.Join(dir, "sshd.pid"), filepath.Join(s.Dir, "keys"),
		SiteAccount, OtherUser, forwarding, auth, s.SlurmConf)), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // sshd's privilege separation directory
		return err
	}
	n.argv = append(append([]string{"env"}, env...), "/usr/sbin/sshd", "-D", "-e", "-f", config)
	s.Logins[l.Name] = n
	return s.runLogin(n)
}

// runLogin starts the login node's sshd and waits for it to answer; the sshd it replaces, if
// any, keeps its place among the daemons Stop stops in order.
func (s *Site) runLogin(n *LoginNode) error {
	p, err := startProcess("sshd "+n.Name, n.Log, n.argv[0], n.argv[1:]...)
	if err != nil {
		return err
	}
	if i := slices.Index(s.procs, n.proc); n.proc != nil && i >= 0 {
		s.procs[i] = p
	} else {
		s.procs = append(s.procs, p)
	}
	n.proc = p
	addr := n.Host + ":" + strconv.Itoa(n.Port)
	return poll(p, 10*time.Second, func() error {
		out, err := exec.Command("nc", "-z", "-w", "1", n.Host, strconv.Itoa(n.Port)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("sshd at %s not answering: %v %s", addr, err, out)
		}
		return nil
	})
}

// StopLogin takes the login node down as a crash or a reboot of it would: its sshd listener
// and every session process it forked are killed, so connected clients see their connection
// close and new ones are refused, until StartLogin. sshd puts each session in a session of
// its own (setsid), out of the listener's process group, so the sessions are found as its
// descendants in /proc: each one found is stopped (SIGSTOP) before the next look, so none can
// fork a process that escapes, and once no new one turns up all are killed.
func (s *Site) StopLogin(name string) error {
	n, err := s.login(name)
	if err != nil {
		return err
	}
	if exited := n.proc.exitedErr(); exited != nil {
		return fmt.Errorf("login node %s is not running: %w", name, exited)
	}
	listener := n.proc.cmd.Process.Pid
	stopped := map[int]bool{listener: true}
	_ = syscall.Kill(listener, syscall.SIGSTOP)
	for found := true; found; {
		tree, err := descendants(listener)
		if err != nil {
			return err
		}
		found = false
		for _, pid := range tree {
			if !stopped[pid] {
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				stopped[pid], found = true, true
			}
		}
	}
	for pid := range stopped {
		if pid != listener {
			_ = syscall.Kill(pid, syscall.SIGKILL) // SIGKILL ends a stopped process too
		}
	}
	n.proc.kill()
	return nil
}

// StartLogin starts a login node StopLogin stopped again: the same address, port, host key
// and sshd_config, so clients that pinned its host key log in as before.
func (s *Site) StartLogin(name string) error {
	n, err := s.login(name)
	if err != nil {
		return err
	}
	if n.proc.exitedErr() == nil {
		return fmt.Errorf("login node %s is running already", name)
	}
	return s.runLogin(n)
}

func (s *Site) login(name string) (*LoginNode, error) {
	n, ok := s.Logins[name]
	if !ok {
		return nil, fmt.Errorf("the site has no login node %q", name)
	}
	return n, nil
}

// descendants are the processes below pid (children, theirs, ...), from the parent each one's
// /proc/<pid>/stat names.
func descendants(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // it exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		if parent, err := strconv.Atoi(fields[1]); err == nil {
			children[parent] = append(children[parent], child)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out, nil
}

// Stop cancels every job, stops the daemons in the reverse order of their start and removes
// the compute node's namespace.
func (s *Site) Stop() error {
	var errs []error
	if s.SlurmConf != "" {
		_ = s.Slurm("scancel", "--full", "--user="+SiteAccount).Run()
	}
	for i := len(s.procs) - 1; i >= 0; i-- {
		errs = append(errs, s.procs[i].stop(10*time.Second))
	}
	if s.netns != "" {
		if out, err := exec.Command("ip", "netns", "del", s.netns).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %v %s", s.netns, err, out))
		}
	}
	return errors.Join(errs...)
}

// Start runs a process of the site (a node) that Stop stops with the daemons, its output in
// dir/<name>.log.
func (s *Site) Start(name, bin string, args ...string) (*Process, error) {
	p, err := startProcess(name, filepath.Join(s.Dir, name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	return &Process{p}, nil
}
