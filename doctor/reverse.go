package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// nodeSSHPort is the compute node's sshd port the reverse tunnel's ssh hop dials, as the
// shadow's reverse-hop does.
const nodeSSHPort = "22"

// plainPath is a path that goes into a ProxyCommand single-quoted as it is.
var plainPath = regexp.MustCompile(`^/[A-Za-z0-9_./-]+$`)

// reverse checks the reverse tunnel's way onto the compute node, the node hop, and the two
// programs it runs there: with NodeExec ssh an ssh to --compute-node through the login node,
// with srun a step of the running job --job.
func (s *session) reverse(ctx context.Context) []Check {
	names := []string{CheckNodeHop, CheckSshdPath, CheckPythonPath, CheckStreamLocal, CheckSocketRoot}
	skip := func(why string) []Check {
		out := make([]Check, len(names))
		for i, n := range names {
			out[i] = Check{Name: n, Status: Skip, Detail: why}
		}
		return out
	}
	rev := s.ssh.Reverse
	if !s.in.Network.ReverseEnabled() {
		return skip("not run: the reverse tunnel is off (Reverse.Enabled, with EnableTunnel)")
	}
	var onNode func(command string) result
	var sshToNode func(extra []string, command ...string) result // a session with the node's own sshd; nil under srun
	var where string
	if rev.NodeExec == policy.NodeExecSrun {
		if s.in.Job == "" {
			return skip(fmt.Sprintf("not run: the hop is srun into the pod's running job; give a running job of %s with %s ID", s.ssh.User, FlagJob))
		}
		where = "job " + s.in.Job
		onNode = func(command string) result {
			return s.remote(ctx, fmt.Sprintf("srun --jobid=%s --overlap -N1 -n1 -u -Q %s", quote(s.in.Job), command))
		}
	} else {
		if s.in.ComputeNode == "" {
			return skip(fmt.Sprintf("not run: the hop is ssh to the job's compute node (port 22); give one with %s NAME", FlagComputeNode))
		}
		hop, err := s.nodeHop()
		if err != nil {
			return skip("not run: " + err.Error())
		}
		where = s.in.ComputeNode
		sshToNode = func(extra []string, command ...string) result {
			args := append([]string{"-F", "/dev/null", "-o", "ProxyCommand=" + hop, "-o", "Port=" + nodeSSHPort}, extra...)
			for _, o := range s.opts {
				args = append(args, "-o", o)
			}
			return s.run(ctx, "ssh", append(append(args, "-T", "--", s.in.ComputeNode), command...)...)
		}
		onNode = func(command string) result { return sshToNode(nil, command) }
	}
	hop := onNode("true")
	if hop.code != 0 {
		c := Check{Name: CheckNodeHop, Status: Fail, Remedy: s.remedy(tunnelstate.ReasonNodeHopRefused),
			Detail: fmt.Sprintf("NodeHopRefused: the hop from %s to %s (NodeExec %s) failed (status %d): %s", s.ssh.LoginHost, where, rev.NodeExec, hop.code, lastLines(hop.out))}
		return append([]Check{c}, skip("not run: " + CheckNodeHop + " failed")[1:]...)
	}
	checks := []Check{{Name: CheckNodeHop, Status: Pass, Detail: fmt.Sprintf("%s reached %s with NodeExec %s", s.ssh.LoginHost, where, rev.NodeExec)}}
	for _, p := range []struct{ name, field, prog string }{{CheckSshdPath, "SshdPath", rev.SshdPath}, {CheckPythonPath, "PythonPath", rev.PythonPath}} {
		// A shell on the node finds the program as the step would; the program is its argument.
		res := onNode("sh -c 'command -v \"$1\"' sh " + quote(p.prog))
		if res.code == 0 {
			checks = append(checks, Check{Name: p.name, Status: Pass, Detail: fmt.Sprintf("%s has %s at %s", where, p.prog, lastLines(res.out))})
			continue
		}
		checks = append(checks, Check{Name: p.name, Status: Fail,
			Detail: fmt.Sprintf("%s %q is not found on %s (status %d)%s", p.field, p.prog, where, res.code, said(res.out)),
			Remedy: fmt.Sprintf("The reverse tunnel runs %s on the compute node: the cluster admin sets Reverse.%s for virtual node %s to where the site's compute nodes have it, or the site's admins install it there.", p.prog, p.field, s.in.Node)})
	}
	return append(checks, s.streamLocal(sshToNode), s.socketRoot(onNode, where))
}

// socketRoot runs on the node, through the hop, the pre-exec's choice of the socket directory's
// root, with INTERLINK_SOCKET_DIR_ROOT as --socket-dir-root gives it: the root that variable
// names, or without it the job user's own directory the pre-exec makes (and doctor then makes
// too) under TMPDIR or /tmp. It fails where the job would stop at start.
func (s *session) socketRoot(onNode func(command string) result, where string) Check {
	c := Check{Name: CheckSocketRoot}
	from := "without " + FlagSocketRoot + ", as for a plugin that exports no INTERLINK_SOCKET_DIR_ROOT (interLink's Slurm plugin exports one only through its CommandPrefix)"
	if s.in.SocketDirRoot != "" {
		from = "with INTERLINK_SOCKET_DIR_ROOT=" + s.in.SocketDirRoot + " (" + FlagSocketRoot + ")"
	}
	probe, err := inject.SocketRootProbe(s.in.SocketDirRoot)
	if err != nil {
		c.Status, c.Detail = Skip, "not run: "+FlagSocketRoot+": "+err.Error()
		return c
	}
	res := onNode("sh -c " + quote(probe))
	said := lastLines(res.out)
	for _, line := range strings.Split(res.out, "\n") {
		if l, ok := strings.CutPrefix(strings.TrimSpace(line), "interLink: "); ok {
			said = l
		}
	}
	c.Detail = fmt.Sprintf("%s, on %s: %s", from, where, said)
	if res.code == 0 {
		c.Status = Pass
		return c
	}
	c.Status = Fail
	c.Remedy = fmt.Sprintf("A job of virtual node %s that asks for the reverse tunnel would stop at start. The site's admins remove what the line above names, or have the Slurm plugin give every job a root of the site's, node-local, owned by root or the job's user and not writable by others without the sticky bit: CommandPrefix: \"export INTERLINK_SOCKET_DIR_ROOT=<dir>\" in its configuration (then give the same with %s).", s.in.Node, FlagSocketRoot)
	return c
}

// streamLocal asks the node's own sshd, with Sshd: node, for what the reverse session asks of
// it: a remote forward from a unix socket (ssh -R <socket>:...), refused where sshd_config has
// AllowStreamLocalForwarding no or local. The socket is bound, unlinked first and again when
// the session ends, under /tmp with a name of this run's. Under NodeExec srun the session
// reaches that sshd only from inside the job's step, which doctor does not open.
func (s *session) streamLocal(sshToNode func(extra []string, command ...string) result) Check {
	c := Check{Name: CheckStreamLocal}
	switch {
	case s.ssh.Reverse.Sshd != policy.SshdNode:
		c.Status, c.Detail = Skip, "not run: Sshd: userspace starts its own sshd and needs nothing of the node's"
		return c
	case sshToNode == nil:
		c.Status, c.Detail = Skip, "not checked: under NodeExec srun the session reaches the node's sshd from inside the job's step; check sshd_config there allows AllowStreamLocalForwarding"
		return c
	}
	sock := "/tmp/shadowgate-doctor-" + filepath.Base(s.dir) + ".sock"
	res := sshToNode([]string{"-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes", "-R", sock + ":127.0.0.1:9"}, "rm -f "+quote(sock))
	if res.code == 0 {
		c.Status, c.Detail = Pass, fmt.Sprintf("the sshd of %s accepted a forward from the unix socket %s", s.in.ComputeNode, sock)
		return c
	}
	c.Status = Fail
	c.Detail = fmt.Sprintf("the sshd of %s refused a forward from a unix socket (status %d): %s", s.in.ComputeNode, res.code, lastLines(res.out))
	c.Remedy = fmt.Sprintf("The reverse tunnel's session asks the node's sshd for unix-socket forwards: the site's admins set AllowStreamLocalForwarding yes (the OpenSSH default) in its sshd_config, or the cluster admin sets Reverse.Sshd: userspace for virtual node %s, which needs nothing of it.", s.in.Node)
	return c
}

// nodeHop is the ProxyCommand of the ssh to the compute node: ssh -W to it through the login
// node (the connect command there in exec mode), with the shadow's options read from a file of the private directory, so a bastion's
// own ProxyCommand among them needs no second quoting.
func (s *session) nodeHop() (string, error) {
	conf := filepath.Join(s.dir, "login.conf")
	if !plainPath.MatchString(conf) {
		return "", fmt.Errorf("the private directory %s holds a character a ProxyCommand may not; set TMPDIR to a plainer path", s.dir)
	}
	if err := os.WriteFile(conf, []byte(strings.Join(s.opts, "\n")+"\n"), 0o600); err != nil {
		return "", err
	}
	if s.ssh.ForwardMode == policy.ForwardModeExec {
		// As reverse-hop's jump: the connect command on the login node, no forwarding asked.
		// Its words and the node (%h) are checked; double quotes keep them one remote line.
		return fmt.Sprintf(`ssh -F %s -T -- %s "%s '%%h' '%%p'"`, quote(conf), quote(s.ssh.LoginHost), s.ssh.ExecConnectCommand), nil
	}
	return fmt.Sprintf("ssh -F %s -W '[%%h]:%%p' -- %s", quote(conf), quote(s.ssh.LoginHost)), nil
}
