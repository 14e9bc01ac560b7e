package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// TestMain runs the tests in a network namespace of their own (sshtest.EnterNodeNetwork), where
// compute nodes have addresses that are not loopback, as doctor requires of --compute-node.
func TestMain(m *testing.M) {
	if err := sshtest.EnterNodeNetwork(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// siteInput is the Input for a virtual node whose login node is srv, with its key and pinned
// host key, ConfigMap node discovery (no Slurm asked) and the reverse tunnel off.
func siteInput(srv *sshtest.Server) Input {
	n := policy.Defaults().Network
	n.EnableTunnel, n.ShadowMode = true, policy.ShadowModeSSH
	n.SSH.LoginHost, n.SSH.Port, n.SSH.User = srv.Host, srv.Port, srv.User
	n.SSH.KeySecret, n.SSH.KnownHostsConfigMap = "hpc-ssh-key", "hpc-known-hosts"
	n.SSH.NodeDiscovery = policy.NodeDiscoveryConfigMap
	return Input{Node: "hpc-vk", Network: n, Key: srv.ClientKey, KnownHosts: srv.KnownHosts}
}

// want is what a case expects of one check: its status and, for a failure or warning, a
// phrase of its remedy (or, for a skip, of its detail).
type want struct {
	status Status
	says   string
}

func TestDoctorChecksOneSiteSettingEach(t *testing.T) {
	sshtest.Require(t, "ssh", "sshd", "ssh-keygen", "nc")
	// A login node's PATH with srun as Slurm 20.02 has it, before the system's directories.
	oldSlurm, err := filepath.Abs("testdata/slurm-20.02")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		sshd  []string
		input func(t *testing.T, srv *sshtest.Server, in *Input)
		want  map[string]want
		// detail is a phrase of a check's detail, whatever its status.
		detail map[string]string
	}{
		"a permissive login node passes every check that can run, and skips the rest naming why": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.ComputeNode = sshtest.NodeAddress(t)
				in.Port = sshtest.FreePort(t, in.ComputeNode)
				sshtest.StartHTTP(t, in.ComputeNode, in.Port, "node07")
			},
			want: map[string]want{
				CheckReachable: {Pass, ""}, CheckHostKey: {Pass, ""}, CheckAuth: {Pass, ""}, CheckForwarding: {Pass, ""},
				CheckExecCommand: {Pass, ""}, CheckRoute: {Pass, ""},
				CheckSqueue: {Skip, "NodeDiscovery is configmap"}, CheckSrun: {Skip, "srun"}, CheckNodeHop: {Skip, "Reverse.Enabled"},
			},
		},
		"in exec mode a permissive login node reaches the compute node with nc": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.ForwardMode = policy.ForwardModeExec
				in.ComputeNode = sshtest.NodeAddress(t)
				in.Port = sshtest.FreePort(t, in.ComputeNode)
				sshtest.StartHTTP(t, in.ComputeNode, in.Port, "node07")
			},
			want: map[string]want{CheckForwarding: {Pass, ""}, CheckExecCommand: {Pass, ""}, CheckRoute: {Pass, ""}},
		},
		"a login node that refuses TCP forwarding fails forwarding with the exec-mode remedy, and nc is there": {
			sshd: []string{"AllowTcpForwarding no"},
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.ComputeNode = sshtest.NodeAddress(t)
				in.Port = sshtest.FreePort(t, in.ComputeNode)
				sshtest.StartHTTP(t, in.ComputeNode, in.Port, "node07")
			},
			want: map[string]want{
				CheckAuth: {Pass, ""}, CheckForwarding: {Fail, "sets ForwardMode: exec"}, CheckExecCommand: {Pass, ""},
				CheckRoute: {Skip, CheckForwarding + " did not pass"},
			},
		},
		"in exec mode nc -q 1 passes the end of its input on to the server": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.ForwardMode, in.Network.SSH.ExecConnectCommand = policy.ForwardModeExec, "nc -q 1"
			},
			want: map[string]want{CheckExecCommand: {Pass, ""}, CheckHalfClose: {Pass, ""}},
		},
		"in exec mode nc -N passes the end of its input on to the server": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.ForwardMode, in.Network.SSH.ExecConnectCommand = policy.ForwardModeExec, "nc -N"
			},
			want: map[string]want{CheckExecCommand: {Pass, ""}, CheckHalfClose: {Pass, ""}},
		},
		"in exec mode an nc that holds the connection after its input ends is a warning naming -N and -q 1": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.ForwardMode, in.Network.SSH.ExecConnectCommand = policy.ForwardModeExec, "nc"
			},
			want: map[string]want{CheckExecCommand: {Pass, ""}, CheckHalfClose: {Warn, `"nc -N" if this nc knows -N (OpenBSD netcat: it passes the end of the input on), else "nc -q 1"`}},
		},
		"in portforward mode the half-close of the exec connect command is not checked": {
			want: map[string]want{CheckHalfClose: {Skip, "ForwardMode portforward"}},
		},
		"in exec mode a login node that refuses TCP forwarding warns of it and relays through nc": {
			sshd: []string{"AllowTcpForwarding no"},
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.ForwardMode = policy.ForwardModeExec
				in.ComputeNode = sshtest.NodeAddress(t)
				in.Port = sshtest.FreePort(t, in.ComputeNode)
				sshtest.StartHTTP(t, in.ComputeNode, in.Port, "node07")
			},
			want: map[string]want{CheckForwarding: {Warn, ""}, CheckExecCommand: {Pass, ""}, CheckRoute: {Pass, ""}},
		},
		"a pinned host key that is not the login node's fails the host key check as HostKeyMismatch": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.KnownHosts = otherHostKey(t, srv)
			},
			want: map[string]want{
				CheckReachable: {Pass, ""}, CheckHostKey: {Fail, "Do not turn host key checking off"},
				CheckAuth: {Skip, "host key was not accepted"}, CheckForwarding: {Skip, "no login"},
			},
		},
		"a known_hosts without the login node's key fails the host key check as HostKeyUnknown": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.KnownHosts = emptyFile(t)
			},
			want: map[string]want{CheckHostKey: {Fail, "holds no host key for"}, CheckAuth: {Skip, "host key was not accepted"}},
		},
		"a key the login node does not authorise fails authentication as LoginRefused": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Key = otherKey(t)
			},
			want: map[string]want{
				CheckHostKey: {Pass, ""}, CheckAuth: {Fail, "authorized_keys"}, CheckRoute: {Skip, "no login"},
			},
		},
		"no netcat on the login node's PATH fails the exec connect command in exec mode": {
			// sshd sets PATH for the login's shell: one without nc, where the shell's own
			// builtins (true, command) still run.
			sshd: []string{"SetEnv PATH=/nonexistent"},
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.ForwardMode = policy.ForwardModeExec
				in.ComputeNode = sshtest.NodeAddress(t)
				in.Port = sshtest.FreePort(t, in.ComputeNode)
			},
			want: map[string]want{
				CheckAuth: {Pass, ""}, CheckExecCommand: {Fail, "a netcat the login node has"},
				CheckRoute: {Skip, CheckExecCommand + " did not pass"},
			},
		},
		"no netcat on the login node's PATH is a warning in portforward mode": {
			sshd: []string{"SetEnv PATH=/nonexistent"},
			want: map[string]want{CheckExecCommand: {Warn, ""}, CheckForwarding: {Pass, ""}},
		},
		"a compute node port with nothing listening fails the route as connection refused": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.ComputeNode = sshtest.NodeAddress(t)
				in.Port = sshtest.FreePort(t, in.ComputeNode)
			},
			want: map[string]want{CheckForwarding: {Pass, ""}, CheckRoute: {Fail, "listen on 0.0.0.0"}},
		},
		"in exec mode a compute node port with nothing listening fails the route as connection refused": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.ForwardMode = policy.ForwardModeExec
				in.ComputeNode = sshtest.NodeAddress(t)
				in.Port = sshtest.FreePort(t, in.ComputeNode)
			},
			want: map[string]want{CheckExecCommand: {Pass, ""}, CheckRoute: {Fail, "listen on 0.0.0.0"}},
		},
		"squeue and srun missing on the login node fail the Slurm checks": {
			sshd: []string{"SetEnv PATH=/nonexistent"},
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.NodeDiscovery = policy.NodeDiscoverySlurm
				in.Network.SSH.Reverse.Enabled = true
				in.Network.SSH.Reverse.NodeExec = policy.NodeExecSrun
				in.Job = "42"
			},
			want: map[string]want{
				CheckSqueue: {Fail, "NodeDiscovery: configmap"}, CheckSrun: {Fail, "srun"},
				CheckNodeHop: {Fail, "srun --jobid"}, CheckSshdPath: {Skip, CheckNodeHop + " failed"},
			},
		},
		"the ssh hop reaches --compute-node and finds SshdPath and PythonPath there": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				nodeHop(t, srv, in)
			},
			want: map[string]want{CheckRoute: {Pass, ""}, CheckNodeHop: {Pass, ""}, CheckSshdPath: {Pass, "/usr/sbin/sshd"}, CheckPythonPath: {Pass, "python3"},
				CheckStreamLocal: {Pass, "unix socket"}},
		},
		"without --socket-dir-root the node's TMPDIR gets the job user's own socket directory root": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				nodeHop(t, srv, in)
			},
			want:   map[string]want{CheckSocketRoot: {Pass, "INTERLINK_SOCKET_DIR_ROOT is not set, so the reverse tunnel's socket directory is under " + filepath.Join(os.TempDir(), nodeTmpName) + "-"}},
			detail: map[string]string{CheckSocketRoot: fmt.Sprintf("/interlink-%d, a drwx------ directory of", os.Getuid())},
		},
		"with --socket-dir-root the check names that root as the job's": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				nodeHop(t, srv, in)
				in.SocketDirRoot = "/var/tmp/interlink"
			},
			want: map[string]want{CheckSocketRoot: {Pass, "the reverse tunnel's socket directory is under /var/tmp/interlink, from INTERLINK_SOCKET_DIR_ROOT"}},
		},
		"a --socket-dir-root too long for unix sockets fails the socket directory check": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				nodeHop(t, srv, in)
				in.SocketDirRoot = "/" + strings.Repeat("d", 80)
			},
			want:   map[string]want{CheckSocketRoot: {Fail, "CommandPrefix"}},
			detail: map[string]string{CheckSocketRoot: "INTERLINK_SOCKET_DIR_ROOT has to be shorter"},
		},
		"a symbolic link where the job's own socket directory root goes fails the socket directory check": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				tmp := nodeHop(t, srv, in)
				mine := filepath.Join(tmp, "mine")
				if err := os.Mkdir(mine, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(mine, filepath.Join(tmp, fmt.Sprintf("interlink-%d", os.Getuid()))); err != nil {
					t.Fatal(err)
				}
			},
			want:   map[string]want{CheckSocketRoot: {Fail, "CommandPrefix"}},
			detail: map[string]string{CheckSocketRoot: fmt.Sprintf("/interlink-%d, where the reverse tunnel's sockets go without it, is a symbolic link", os.Getuid())},
		},
		"a node sshd that refuses unix-socket forwards fails the Sshd: node check, naming Sshd: userspace": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				nodeHop(t, srv, in, "AllowStreamLocalForwarding no")
			},
			want: map[string]want{CheckNodeHop: {Pass, ""}, CheckStreamLocal: {Fail, "Reverse.Sshd: userspace"}},
		},
		"with Sshd: userspace the node's own sshd is not asked for forwards": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				nodeHop(t, srv, in, "AllowStreamLocalForwarding no")
				in.Network.SSH.Reverse.Sshd = policy.SshdUserspace
			},
			want: map[string]want{CheckNodeHop: {Pass, ""}, CheckStreamLocal: {Skip, "Sshd: userspace"}},
		},
		"in exec mode the ssh hop goes through nc and reaches --compute-node": {
			sshd: []string{"AllowTcpForwarding no"},
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.ForwardMode = policy.ForwardModeExec
				nodeHop(t, srv, in)
			},
			want: map[string]want{CheckForwarding: {Warn, ""}, CheckRoute: {Pass, ""}, CheckNodeHop: {Pass, ""}, CheckSshdPath: {Pass, ""}},
		},
		"an SshdPath and a PythonPath the compute node lacks fail naming their fields": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				nodeHop(t, srv, in)
				in.Network.SSH.Reverse.SshdPath = "/nonexistent/sshd"
				in.Network.SSH.Reverse.PythonPath = "python3-nonexistent"
			},
			want: map[string]want{CheckNodeHop: {Pass, ""}, CheckSshdPath: {Fail, "Reverse.SshdPath"}, CheckPythonPath: {Fail, "Reverse.PythonPath"}},
		},
		"a keytab kinit cannot read fails authentication as KerberosFailed, and the host key is still checked": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				sshtest.Require(t, "kinit")
				in.Network.SSH.Auth = policy.AuthKerberos
				in.Network.SSH.KeytabSecret, in.Network.SSH.Principal = "site-keytab", "alice@EXAMPLE.ORG"
				in.Key, in.Keytab, in.Krb5Conf = "", emptyFile(t), emptyFile(t)
			},
			want: map[string]want{CheckHostKey: {Pass, ""}, CheckAuth: {Fail, "keytab Secret site-keytab"}, CheckForwarding: {Skip, "no login"}},
		},
		"a compute node refusing the login fails the ssh hop as NodeHopRefused": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				nodeHop(t, srv, in)
				in.Key = otherKeyAuthorisedOn(t, srv)
			},
			want: map[string]want{CheckAuth: {Pass, ""}, CheckNodeHop: {Fail, "Reverse.NodeExec: srun"}, CheckSshdPath: {Skip, CheckNodeHop + " failed"}},
		},
		"through a bastion the login passes with the same key and known_hosts, and reachability dials the bastion": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				bastion := sshtest.StartSSHD(t, authorising(t, srv))
				in.Network.SSH.Bastion = policy.Bastion{Host: bastion.Host, Port: bastion.Port, User: bastion.User}
				in.KnownHosts = knownHosts(t, srv, bastion)
			},
			want: map[string]want{CheckReachable: {Pass, "the bastion"}, CheckHostKey: {Pass, ""}, CheckAuth: {Pass, ""}, CheckForwarding: {Pass, ""}, CheckExecCommand: {Pass, ""}},
		},
		"a bastion whose host key is not pinned fails the host key check": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				bastion := sshtest.StartSSHD(t, authorising(t, srv))
				in.Network.SSH.Bastion = policy.Bastion{Host: bastion.Host, Port: bastion.Port, User: bastion.User}
			},
			want: map[string]want{CheckReachable: {Pass, "the bastion"}, CheckHostKey: {Fail, "its key is the one that belongs in ConfigMap"}, CheckAuth: {Skip, ""}},
		},
		"an srun without --overlap fails the srun check naming Slurm 20.11": {
			sshd: []string{"SetEnv PATH=" + oldSlurm + ":/usr/bin:/bin"},
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.Reverse.Enabled = true
				in.Network.SSH.Reverse.NodeExec = policy.NodeExecSrun
			},
			want: map[string]want{CheckSrun: {Fail, "Slurm 20.11"}, CheckNodeHop: {Skip, FlagJob}},
		},
		"the srun hop without --job is skipped naming the flag": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.Reverse.Enabled = true
				in.Network.SSH.Reverse.NodeExec = policy.NodeExecSrun
			},
			want: map[string]want{CheckNodeHop: {Skip, FlagJob}, CheckPythonPath: {Skip, FlagJob}},
		},
		"the ssh hop without --compute-node is skipped naming the flag": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.Reverse.Enabled = true
			},
			want: map[string]want{CheckNodeHop: {Skip, FlagComputeNode}},
		},
		"without --key the host key is still checked and authentication is skipped naming the flag": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) { in.Key = "" },
			want: map[string]want{
				CheckHostKey: {Pass, ""}, CheckAuth: {Skip, FlagKey}, CheckForwarding: {Skip, "no login"},
			},
		},
		"without --known-hosts a pinned host key is skipped naming the flag": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) { in.KnownHosts = "" },
			want:  map[string]want{CheckReachable: {Pass, ""}, CheckHostKey: {Skip, FlagKnownHosts}, CheckAuth: {Skip, ""}},
		},
		"a host key learned at first use is a warning naming accept-new": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) { in.Network.SSH.KnownHostsConfigMap = "" },
			want:  map[string]want{CheckHostKey: {Warn, "ssh-keyscan"}, CheckAuth: {Pass, ""}},
		},
		"a login port with nothing listening fails reachability and skips the rest": {
			input: func(t *testing.T, srv *sshtest.Server, in *Input) {
				in.Network.SSH.Port = sshtest.FreePort(t, srv.Host)
			},
			want: map[string]want{CheckReachable: {Fail, "cannot reach it"}, CheckHostKey: {Skip, "not reachable"}, CheckPythonPath: {Skip, "not reachable"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := sshtest.StartSSHD(t, tc.sshd...)
			in := siteInput(srv)
			if tc.input != nil {
				tc.input(t, srv, &in)
			}
			if err := Validate(&in); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			checks := Run(context.Background(), in)
			assertChecks(t, checks, tc.want)
			for _, c := range checks {
				if d, ok := tc.detail[c.Name]; ok && !strings.Contains(c.Detail, d) {
					t.Errorf("%s's detail is %q, want it to say %q", c.Name, c.Detail, d)
				}
			}
		})
	}
}

// assertChecks holds checks to want, and every check to the contract: all of them, in order,
// and a remedy with every failure.
func assertChecks(t *testing.T, checks []Check, want map[string]want) {
	t.Helper()
	order := []string{CheckReachable, CheckHostKey, CheckAuth, CheckForwarding, CheckExecCommand, CheckHalfClose, CheckRoute, CheckSqueue, CheckSrun, CheckNodeHop, CheckSshdPath, CheckPythonPath, CheckStreamLocal, CheckSocketRoot}
	var got strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&got, "  %s %s: %s\n    remedy: %s\n", c.Status, c.Name, c.Detail, c.Remedy)
	}
	if len(checks) != len(order) {
		t.Fatalf("%d checks, want %d:\n%s", len(checks), len(order), got.String())
	}
	for i, c := range checks {
		if c.Name != order[i] {
			t.Errorf("check %d is %q, want %q", i, c.Name, order[i])
		}
		if c.Status == Fail && c.Remedy == "" {
			t.Errorf("%s failed with no remedy", c.Name)
		}
		w, ok := want[c.Name]
		if !ok {
			continue
		}
		if c.Status != w.status {
			t.Errorf("%s is %s, want %s", c.Name, c.Status, w.status)
		}
		text := c.Remedy
		if c.Status == Skip || c.Status == Pass {
			text = c.Detail
		}
		if !strings.Contains(text, w.says) {
			t.Errorf("%s says %q, want it to say %q", c.Name, text, w.says)
		}
	}
	if t.Failed() {
		t.Logf("checks:\n%s", got.String())
	}
}

// otherHostKey is a known_hosts naming srv's address with a host key that is not srv's.
func otherHostKey(t *testing.T, srv *sshtest.Server) string {
	t.Helper()
	key := filepath.Join(t.TempDir(), "host")
	sshtest.Keygen(t, key)
	file := filepath.Join(t.TempDir(), "known_hosts")
	line := fmt.Sprintf("[%s]:%d %s", srv.Host, srv.Port, sshtest.ReadFile(t, key+".pub"))
	if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// otherKey is a client key no login node of the tests authorises.
func otherKey(t *testing.T) string {
	t.Helper()
	key := filepath.Join(t.TempDir(), "id")
	sshtest.Keygen(t, key)
	return key
}

// nodeHop turns on the reverse tunnel with NodeExec ssh and makes --compute-node a compute
// node with sshd on port 22, where the hop dials, which takes the login node's client key (as
// it stands now) and
// whose host key is pinned beside the login node's. Its sessions' TMPDIR is tmp, a nodeTmp.
func nodeHop(t *testing.T, login *sshtest.Server, in *Input, config ...string) (tmp string) {
	t.Helper()
	tmp = nodeTmp(t)
	node := sshtest.StartNodeSSHDOnPort(t, 22, append([]string{authorising(t, login), "SetEnv TMPDIR=" + tmp}, config...)...)
	in.Network.SSH.Reverse.Enabled = true
	in.ComputeNode, in.Port = node.Host, node.Port
	in.KnownHosts = knownHosts(t, login, node)
	return tmp
}

// nodeTmpName begins the name of nodeTmp's directories.
const nodeTmpName = "node-tmp"

// nodeTmp is a TMPDIR for the compute node's sessions, like /tmp: mode 1777, and a short path,
// as the socket directory under it must be.
func nodeTmp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", nodeTmpName+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// authorising is the sshd config line that authorises login's client key as it stands now.
func authorising(t *testing.T, login *sshtest.Server) string {
	t.Helper()
	keys := filepath.Join(t.TempDir(), "authorized_keys")
	if err := os.WriteFile(keys, []byte(sshtest.ReadFile(t, login.ClientKey+".pub")), 0o600); err != nil {
		t.Fatal(err)
	}
	return "AuthorizedKeysFile " + keys
}

// knownHosts is one known_hosts pinning the host keys of all the servers.
func knownHosts(t *testing.T, servers ...*sshtest.Server) string {
	t.Helper()
	var hosts strings.Builder
	for _, srv := range servers {
		hosts.WriteString(sshtest.ReadFile(t, srv.KnownHosts))
	}
	file := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(hosts.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// otherKeyAuthorisedOn is a fresh client key that login authorises besides its own, and no
// compute node does.
func otherKeyAuthorisedOn(t *testing.T, login *sshtest.Server) string {
	t.Helper()
	key := otherKey(t)
	keys := filepath.Join(filepath.Dir(login.ClientKey), "authorized_keys")
	f, err := os.OpenFile(keys, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(sshtest.ReadFile(t, key+".pub")); err != nil {
		t.Fatal(err)
	}
	return key
}

func emptyFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
