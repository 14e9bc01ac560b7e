package doctor

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
	"github.com/interlink-hq/shadowgate/validate/policy"
	"github.com/interlink-hq/shadowgate/validate/syntax"
)

// Status is a check's verdict.
type Status string

// The verdicts. Skip is a check that did not run, its Detail says why (the flag that would
// run it, or the failed check it needs); it is never a pass.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Warn Status = "warn"
	Skip Status = "skip"
)

// Check is one check's result.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail is what was tried and what was seen, with what ssh said.
	Detail string `json:"detail"`
	// Remedy is what to do about a failure or warning, and who does it; empty where nothing
	// needs doing.
	Remedy string `json:"remedy"`
}

// The checks, in the order Run makes them.
const (
	CheckReachable   = "login host reachable"
	CheckHostKey     = "host key"
	CheckAuth        = "authentication"
	CheckForwarding  = "TCP forwarding"
	CheckExecCommand = "exec connect command"
	CheckHalfClose   = "exec connect command: half-close"
	CheckRoute       = "route to the compute node"
	CheckSqueue      = "Slurm: squeue"
	CheckSrun        = "Slurm: srun --overlap"
	CheckNodeHop     = "reverse tunnel: node hop"
	CheckSshdPath    = "reverse tunnel: SshdPath"
	CheckPythonPath  = "reverse tunnel: PythonPath"
	CheckStreamLocal = "reverse tunnel: node sshd unix-socket forwards"
	CheckSocketRoot  = "reverse tunnel: socket directory"
)

// Input is what Run checks: one virtual node of a parsed policy and the files and names the
// user gives for what the policy keeps in the cluster. Every field but Node and Network may be
// empty (Port zero): the checks that need it are skipped naming its flag.
type Input struct {
	Node    string
	Network policy.Network
	// Key is the private key (--key), under Auth publickey.
	Key string
	// KnownHosts is the known_hosts of KnownHostsConfigMap (--known-hosts).
	KnownHosts string
	// Keytab, Principal and Krb5Conf are for kinit under Auth kerberos; Principal empty is the
	// policy's.
	Keytab, Principal, Krb5Conf string
	// ComputeNode and Port are a compute node and a port there the login node should reach.
	ComputeNode string
	Port        int
	// Job is a running Slurm job of the login user, for the srun hop of the reverse tunnel.
	Job string
	// SocketDirRoot is the INTERLINK_SOCKET_DIR_ROOT the site's plugin exports to its jobs
	// (through its CommandPrefix), empty where it exports none.
	SocketDirRoot string
}

// The flags that give Input's fields, named by refusals and skipped checks.
const (
	FlagKey         = "--key"
	FlagKnownHosts  = "--known-hosts"
	FlagKeytab      = "--keytab"
	FlagPrincipal   = "--principal"
	FlagKrb5Conf    = "--krb5-conf"
	FlagComputeNode = "--compute-node"
	FlagPort        = "--port"
	FlagJob         = "--job"
	FlagSocketRoot  = "--socket-dir-root"
)

var jobID = regexp.MustCompile(`^[0-9]{1,10}$`)

// socketRoot is what the job's pre-exec takes as INTERLINK_SOCKET_DIR_ROOT.
var socketRoot = regexp.MustCompile(`^/[A-Za-z0-9._/+-]*$`)

// Validate refuses an Input whose values Run could not pass to ssh or a shell as they are,
// naming the flag or policy field, the value and what to do, and makes the files' paths
// absolute, as ssh options need them. Run assumes a valid Input.
func Validate(in *Input) error {
	s := &in.Network.SSH
	if !in.Network.SSHShadow() {
		return fmt.Errorf("virtual node %s has ShadowMode %q: doctor checks the SSH shadow, of nodes with ShadowMode ssh only; leave it out of --node", in.Node, in.Network.ShadowMode)
	}
	if ok, why := syntax.Host(s.LoginHost, syntax.DialedByShadow); !ok {
		return fmt.Errorf("virtual node %s: SSH.LoginHost %q: %s", in.Node, s.LoginHost, why)
	}
	if !syntax.UserName(s.User) {
		return fmt.Errorf("virtual node %s: SSH.User %q is not a login name", in.Node, s.User)
	}
	if ok, why := syntax.ConnectCommand(s.ExecConnectCommand); !ok {
		return fmt.Errorf("virtual node %s: SSH.ExecConnectCommand %q: %s", in.Node, s.ExecConnectCommand, why)
	}
	if r := s.Reverse; in.Network.ReverseEnabled() && (!syntax.Program(r.SshdPath) || !syntax.Program(r.PythonPath)) {
		return fmt.Errorf("virtual node %s: SSH.Reverse.SshdPath %q or PythonPath %q is not a command name or absolute path", in.Node, r.SshdPath, r.PythonPath)
	}
	// The key and known_hosts become ssh options, single-quoted in a bastion's ProxyCommand.
	for _, f := range []struct {
		flag string
		path *string
	}{{FlagKey, &in.Key}, {FlagKnownHosts, &in.KnownHosts}, {FlagKeytab, &in.Keytab}, {FlagKrb5Conf, &in.Krb5Conf}} {
		if *f.path == "" {
			continue
		}
		abs, err := readable(*f.path)
		if err != nil {
			return fmt.Errorf("%s %q: %v", f.flag, *f.path, err)
		}
		if !syntax.SSHOption("File=" + abs) {
			return fmt.Errorf("%s %q: the path %s holds a character ssh options may not (a space, a quote, '%%', '~'): copy the file to a plainer path", f.flag, *f.path, abs)
		}
		*f.path = abs
	}
	if in.Principal != "" && !syntax.Principal(in.Principal) {
		return fmt.Errorf("%s %q is not a Kerberos principal such as alice@EXAMPLE.ORG", FlagPrincipal, in.Principal)
	}
	if (in.ComputeNode == "") != (in.Port == 0) {
		return fmt.Errorf("%s and %s go together: the route check dials that node and port from the login node", FlagComputeNode, FlagPort)
	}
	if in.ComputeNode != "" {
		if ok, why := syntax.Host(in.ComputeNode, syntax.DialedByLoginNode); !ok {
			return fmt.Errorf("%s %q: %s", FlagComputeNode, in.ComputeNode, why)
		}
		if in.Port < 1 || in.Port > 65535 {
			return fmt.Errorf("%s %d is not a TCP port (1 to 65535)", FlagPort, in.Port)
		}
	}
	if in.Job != "" && !jobID.MatchString(in.Job) {
		return fmt.Errorf("%s %q is not a Slurm job id (digits, as squeue --me prints them)", FlagJob, in.Job)
	}
	if in.SocketDirRoot != "" && !socketRoot.MatchString(in.SocketDirRoot) {
		return fmt.Errorf("%s %q is not an absolute path of letters, digits and ._/+-, which the job's pre-exec needs of INTERLINK_SOCKET_DIR_ROOT", FlagSocketRoot, in.SocketDirRoot)
	}
	return nil
}

func readable(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.IsDir() {
		return "", fmt.Errorf("not a readable file")
	}
	return abs, nil
}

// Run makes every check for in, which Validate accepted, in order: a check that cannot run
// because one before it failed is skipped naming that one.
func Run(ctx context.Context, in Input) []Check {
	dir, err := os.MkdirTemp("", "shadowgate-doctor-")
	if err != nil {
		c := Check{Name: CheckReachable, Status: Fail, Detail: "no private directory for the ticket cache and learned host keys: " + err.Error(),
			Remedy: "Set TMPDIR to a writable directory."}
		return skipRest([]Check{c}, "not run: no private directory")
	}
	defer os.RemoveAll(dir)
	s := newSession(in, dir)
	checks := []Check{s.reachable(ctx)}
	if checks[0].Status == Fail {
		return skipRest(checks, "not run: the login host is not reachable")
	}
	hostKey, auth := s.login(ctx)
	checks = append(checks, hostKey, auth)
	if auth.Status != Pass {
		return skipRest(checks, "not run: no login ("+CheckAuth+" did not pass)")
	}
	fwd := s.forwarding(ctx)
	execCmd := s.execCommand(ctx)
	checks = append(checks, fwd, execCmd, s.halfClose(ctx, execCmd), s.route(ctx, fwd, execCmd))
	squeue, srun := s.slurm(ctx)
	checks = append(checks, squeue, srun)
	return append(checks, s.reverse(ctx)...)
}

// order is every check's name, in the order Run makes them.
var order = []string{CheckReachable, CheckHostKey, CheckAuth, CheckForwarding, CheckExecCommand, CheckHalfClose, CheckRoute,
	CheckSqueue, CheckSrun, CheckNodeHop, CheckSshdPath, CheckPythonPath, CheckStreamLocal, CheckSocketRoot}

// skipRest appends to checks, the first of order, every one after them, skipped for why.
func skipRest(checks []Check, why string) []Check {
	for _, name := range order[len(checks):] {
		checks = append(checks, Check{Name: name, Status: Skip, Detail: why})
	}
	return checks
}

// Failed reports whether any check failed.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// session is one Run: the ssh options the shadow would use, with the user's files, and the
// private directory for what the shadow keeps in its state directory.
type session struct {
	in   Input
	ssh  *policy.SSH
	dir  string
	opts []string
	// env is the environment of kinit and ssh: the private ticket cache and --krb5-conf.
	env []string
}

func newSession(in Input, dir string) *session {
	s := &session{in: in, ssh: &in.Network.SSH, dir: dir}
	files := inject.CredentialFiles{Identity: in.Key, KnownHosts: filepath.Join(dir, "known_hosts")}
	if s.pinned() && in.KnownHosts != "" {
		files.KnownHosts = in.KnownHosts
	}
	if files.Identity == "" {
		// No key given: the login still shows whether the host key is accepted, then fails.
		files.Identity = os.DevNull
	}
	s.opts = inject.SSHOptions(s.ssh, files)
	s.env = append(os.Environ(), "KRB5CCNAME=FILE:"+filepath.Join(dir, "krb5cc"))
	if in.Krb5Conf != "" {
		s.env = append(s.env, "KRB5_CONFIG="+in.Krb5Conf)
	}
	return s
}

func (s *session) pinned() bool { return s.ssh.KnownHostsConfigMap != "" }

func (s *session) kerberos() bool { return s.ssh.Auth == policy.AuthKerberos }

func (s *session) context(ports ...int32) tunnelstate.Context {
	return tunnelstate.Context{Node: s.in.Node, SSH: *s.ssh, Ports: ports}
}

func (s *session) remedy(r tunnelstate.Reason, ports ...int32) string {
	return tunnelstate.Remedy(r, s.context(ports...))
}

func (s *session) loginName() string {
	return fmt.Sprintf("%s@%s:%d", s.ssh.User, s.ssh.LoginHost, s.ssh.Port)
}

// reachable dials the first hop, the bastion when there is one, over TCP from here.
func (s *session) reachable(ctx context.Context) Check {
	host, port := s.ssh.LoginHost, s.ssh.Port
	what := "the login node"
	if s.ssh.Bastion.Host != "" {
		host, port, what = s.ssh.Bastion.Host, s.ssh.Bastion.Port, "the bastion"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return Check{Name: CheckReachable, Status: Fail, Detail: fmt.Sprintf("no TCP connection to %s %s: %v", what, addr, err), Remedy: s.remedy(tunnelstate.ReasonLoginUnreachable)}
	}
	c.Close()
	return Check{Name: CheckReachable, Status: Pass, Detail: fmt.Sprintf("%s %s accepts TCP connections from here", what, addr)}
}
