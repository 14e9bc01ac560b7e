package doctor

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// login logs in once, as the shadow does (ssh ... -- true), and reads two checks from it: the
// host key, which ssh checks before authenticating, and the login itself. Under Kerberos it
// first gets a ticket from --keytab into the private cache.
func (s *session) login(ctx context.Context) (Check, Check) {
	if s.pinned() && s.in.KnownHosts == "" {
		why := fmt.Sprintf("not run: the policy pins the host key in ConfigMap %s; give its known_hosts with %s", s.ssh.KnownHostsConfigMap, FlagKnownHosts)
		return Check{Name: CheckHostKey, Status: Skip, Detail: why}, Check{Name: CheckAuth, Status: Skip, Detail: "not run: the host key is not checked"}
	}
	credential, kinitFailed := s.credential(ctx)
	res := s.remote(ctx, "true")
	reason, line := classify(res.out)
	var hostKey Check
	switch {
	case res.code == 0 || reason == tunnelstate.ReasonLoginRefused:
		hostKey = s.hostKeyAccepted(ctx)
	case reason == tunnelstate.ReasonHostKeyMismatch || reason == tunnelstate.ReasonHostKeyUnknown:
		hostKey = Check{Name: CheckHostKey, Status: Fail, Remedy: s.remedy(reason),
			Detail: fmt.Sprintf("%s: %s (%s) refused the host key of %s: %s", reason, FlagKnownHosts, s.in.KnownHosts, s.ssh.LoginHost, line)}
		return hostKey, Check{Name: CheckAuth, Status: Skip, Detail: "not run: the host key was not accepted"}
	default:
		if reason == "" {
			reason = tunnelstate.ReasonLoginUnreachable
		}
		hostKey = Check{Name: CheckHostKey, Status: Fail, Remedy: s.remedy(reason),
			Detail: fmt.Sprintf("%s: no ssh session to %s (ssh exited with status %d): %s", reason, s.loginName(), res.code, line)}
		return hostKey, Check{Name: CheckAuth, Status: Skip, Detail: "not run: no ssh session"}
	}
	switch {
	case kinitFailed.Name != "":
		return hostKey, kinitFailed
	case credential == "":
		flag := FlagKey
		if s.kerberos() {
			flag = FlagKeytab
		}
		return hostKey, Check{Name: CheckAuth, Status: Skip, Detail: "not run: give the credential with " + flag}
	case res.code == 0:
		return hostKey, Check{Name: CheckAuth, Status: Pass, Detail: fmt.Sprintf("%s accepted %s", s.loginName(), credential)}
	}
	return hostKey, Check{Name: CheckAuth, Status: Fail, Remedy: s.remedy(tunnelstate.ReasonLoginRefused),
		Detail: fmt.Sprintf("LoginRefused: %s refused %s: %s", s.loginName(), credential, line)}
}

// credential names the credential the login uses, "" when none was given; under Kerberos it
// runs kinit first, a failed Check when that fails.
func (s *session) credential(ctx context.Context) (string, Check) {
	if !s.kerberos() {
		if s.in.Key == "" {
			return "", Check{}
		}
		return "the key " + s.in.Key, Check{}
	}
	if s.in.Keytab == "" {
		return "", Check{}
	}
	principal := s.in.Principal
	if principal == "" {
		principal = s.ssh.Principal
	}
	res := s.run(ctx, "kinit", "-kt", s.in.Keytab, principal)
	if res.code != 0 {
		return "", Check{Name: CheckAuth, Status: Fail, Remedy: s.remedy(tunnelstate.ReasonKerberosFailed),
			Detail: fmt.Sprintf("KerberosFailed: kinit -kt %s %s failed (status %d): %s", s.in.Keytab, principal, res.code, lastLines(res.out))}
	}
	return "the Kerberos ticket of " + principal, Check{}
}

// hostKeyAccepted is the host key check once ssh accepted the key: a pass when pinned, else a
// warning naming the first use accept-new trusts.
func (s *session) hostKeyAccepted(ctx context.Context) Check {
	if s.pinned() {
		return Check{Name: CheckHostKey, Status: Pass, Detail: fmt.Sprintf("the host key of %s matches %s (ConfigMap %s)", s.ssh.LoginHost, s.in.KnownHosts, s.ssh.KnownHostsConfigMap)}
	}
	learned := lastLines(s.run(ctx, "ssh-keygen", "-l", "-f", filepath.Join(s.dir, "known_hosts")).out)
	detail := fmt.Sprintf("KnownHostsConfigMap is not set: the shadow accepts whatever key %s shows at its first login (StrictHostKeyChecking=accept-new), so a first login to an impostor, a man in the middle, goes unnoticed and later logins trust its key; offered now: %s", s.ssh.LoginHost, learned)
	if s.in.KnownHosts != "" {
		detail += "; " + FlagKnownHosts + " is not read for this node"
	}
	return Check{Name: CheckHostKey, Status: Warn, Detail: detail,
		Remedy: fmt.Sprintf("The cluster admin pins the key: ssh-keyscan -p %d %s, checked against the site's published fingerprint, into a ConfigMap under key known_hosts, named by KnownHostsConfigMap for virtual node %s.", s.ssh.Port, s.ssh.LoginHost, s.in.Node)}
}

// forwarding opens one forward channel to the login node's own sshd, which needs the login
// node to allow TCP forwarding; a connection refused there still shows forwarding allowed.
// Exec mode needs no forwarding: a refusal is a warning there.
func (s *session) forwarding(ctx context.Context) Check {
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ssh.Port))
	opened, out := s.channel(ctx, target)
	if opened {
		return Check{Name: CheckForwarding, Status: Pass, Detail: fmt.Sprintf("%s opened a forward channel to %s", s.ssh.LoginHost, target)}
	}
	reason, line := classify(out)
	switch reason {
	case tunnelstate.ReasonForwardingProhibited:
		c := Check{Name: CheckForwarding, Status: Fail, Remedy: s.remedy(reason),
			Detail: fmt.Sprintf("ForwardingProhibited: %s refused to open a channel to %s: %s", s.ssh.LoginHost, target, line)}
		if s.ssh.ForwardMode == policy.ForwardModeExec {
			c.Status, c.Remedy = Warn, ""
			c.Detail += fmt.Sprintf("; ForwardMode exec relays through %s instead", s.ssh.ExecConnectCommand)
		}
		return c
	case tunnelstate.ReasonNodeConnectionRefused, tunnelstate.ReasonNodeUnreachable:
		return Check{Name: CheckForwarding, Status: Pass, Detail: fmt.Sprintf("%s allows TCP forwarding: it opened the channel's connection to %s, which failed (%s), and would refuse a forward it does not allow first", s.ssh.LoginHost, target, line)}
	}
	return Check{Name: CheckForwarding, Status: Fail, Remedy: s.remedy(tunnelstate.ReasonForwardingProhibited),
		Detail: fmt.Sprintf("no forward channel to %s through %s: %s", target, s.ssh.LoginHost, line)}
}

// connectProgram is ExecConnectCommand's program, its first word.
func (s *session) connectProgram() string {
	prog, _, _ := strings.Cut(s.ssh.ExecConnectCommand, " ")
	return prog
}

// halfClose runs ExecConnectCommand on the login node to the login node's own sshd with no
// input, as the relay runs it for a client that has sent all it will send. sshd closes a
// connection that ends before the client's version line, so a command that passes the end of
// its input on (a half-close) returns at once with sshd's banner; one that does not holds the
// connection until sshd's LoginGraceTime, and so would a protocol whose server answers only
// once the request has ended. A warning, not a failure: HTTP and most request-response
// protocols end their requests themselves.
func (s *session) halfClose(ctx context.Context, execCmd Check) Check {
	c := Check{Name: CheckHalfClose}
	switch {
	case s.ssh.ForwardMode != policy.ForwardModeExec:
		c.Status, c.Detail = Skip, "not run: ForwardMode portforward does not use ExecConnectCommand"
		return c
	case execCmd.Status != Pass:
		c.Status, c.Detail = Skip, "not run: "+CheckExecCommand+" did not pass"
		return c
	}
	target := fmt.Sprintf("%s %d", quote(s.ssh.LoginHost), s.ssh.Port)
	ctx, cancel := context.WithTimeout(ctx, halfCloseWait)
	defer cancel()
	start := time.Now()
	res := s.remote(ctx, "exec "+s.ssh.ExecConnectCommand+" "+target+" </dev/null")
	took := time.Since(start).Round(100 * time.Millisecond)
	switch {
	case ctx.Err() != nil:
		c.Status = Warn
		c.Detail = fmt.Sprintf("'%s %s' with no input was still connected to the login node's own sshd after %s: it does not pass the end of its input on", s.ssh.ExecConnectCommand, target, halfCloseWait)
		c.Remedy = fmt.Sprintf("A protocol whose server answers only once the request has ended (a raw TCP request-response) hangs through ForwardMode exec on %s; HTTP does not. The cluster admin sets ExecConnectCommand to \"%[2]s -N\" if this nc knows -N (OpenBSD netcat: it passes the end of the input on), else \"%[2]s -q 1\" if it knows -q (it quits a second after its input ends, holding the channel that second).", s.in.Node, s.connectProgram())
	case strings.Contains(res.out, "SSH-"):
		c.Status = Pass
		c.Detail = fmt.Sprintf("'%s %s' with no input ended after %s with the login node's sshd banner: the end of the client's data reaches the server", s.ssh.ExecConnectCommand, target, took)
	default:
		c.Status = Skip
		c.Detail = fmt.Sprintf("not run: '%s %s' on the login node did not reach its own sshd (exit %d)%s", s.ssh.ExecConnectCommand, target, res.code, said(res.out))
	}
	return c
}

// execCommand looks for ExecConnectCommand's program on the login node's PATH for User. In
// portforward mode a missing one is a warning: it says whether ForwardMode exec would do.
func (s *session) execCommand(ctx context.Context) Check {
	prog := s.connectProgram()
	res := s.remote(ctx, "command -v "+quote(prog))
	if res.code == 0 {
		return Check{Name: CheckExecCommand, Status: Pass, Detail: fmt.Sprintf("%s has %s at %s", s.ssh.LoginHost, prog, lastLines(res.out))}
	}
	c := Check{Name: CheckExecCommand, Status: Fail, Remedy: s.remedy(tunnelstate.ReasonExecCommandMissing),
		Detail: fmt.Sprintf("ExecCommandMissing: '%s' is not found on %s (command -v exited with status %d)%s", prog, s.ssh.LoginHost, res.code, said(res.out))}
	if s.ssh.ForwardMode != policy.ForwardModeExec {
		c.Status = Warn
		c.Detail += "; ForwardMode portforward does not use it, ForwardMode exec would"
	}
	return c
}

// route connects from the login node to --compute-node:--port as the shadow's checks do: a
// forward channel in portforward mode, the connect command with -z in exec mode.
func (s *session) route(ctx context.Context, fwd, execCmd Check) Check {
	if s.in.ComputeNode == "" {
		return Check{Name: CheckRoute, Status: Skip, Detail: fmt.Sprintf("not run: give a compute node and a port on it with %s NAME %s P", FlagComputeNode, FlagPort)}
	}
	target := net.JoinHostPort(s.in.ComputeNode, strconv.Itoa(s.in.Port))
	port := int32(s.in.Port)
	var out string
	if s.ssh.ForwardMode == policy.ForwardModeExec {
		if execCmd.Status != Pass {
			return Check{Name: CheckRoute, Status: Skip, Detail: "not run: " + CheckExecCommand + " did not pass"}
		}
		// -z connects and closes, -v makes OpenBSD nc say why it could not.
		res := s.remote(ctx, fmt.Sprintf("%s -z -v %s %s", s.ssh.ExecConnectCommand, quote(s.in.ComputeNode), quote(strconv.Itoa(s.in.Port))))
		if res.code == 0 {
			return Check{Name: CheckRoute, Status: Pass, Detail: fmt.Sprintf("%s reached %s with %s", s.ssh.LoginHost, target, s.ssh.ExecConnectCommand)}
		}
		out = res.out
	} else {
		if fwd.Status != Pass {
			return Check{Name: CheckRoute, Status: Skip, Detail: "not run: " + CheckForwarding + " did not pass"}
		}
		opened, o := s.channel(ctx, target)
		if opened {
			return Check{Name: CheckRoute, Status: Pass, Detail: fmt.Sprintf("%s opened a connection to %s", s.ssh.LoginHost, target)}
		}
		out = o
	}
	reason, line := classify(out)
	if reason != tunnelstate.ReasonNodeConnectionRefused {
		reason = tunnelstate.ReasonNodeUnreachable
	}
	return Check{Name: CheckRoute, Status: Fail, Remedy: s.remedy(reason, port),
		Detail: fmt.Sprintf("%s: no connection from %s to %s: %s", reason, s.ssh.LoginHost, target, line)}
}

// slurmAsked says whether the shadow runs Slurm's commands on the login node: squeue for
// NodeDiscovery slurm and for the srun carrier of the reverse tunnel, srun for that carrier.
func (s *session) slurmAsked() (squeue, srun bool) {
	srun = s.in.Network.ReverseEnabled() && s.ssh.Reverse.NodeExec == policy.NodeExecSrun
	return srun || s.ssh.NodeDiscovery == policy.NodeDiscoverySlurm, srun
}

func (s *session) slurm(ctx context.Context) (Check, Check) {
	squeue, srun := s.slurmAsked()
	sq := Check{Name: CheckSqueue, Status: Skip, Detail: "not run: NodeDiscovery is configmap and Reverse.NodeExec is not srun, so the shadow asks Slurm nothing"}
	if squeue {
		sq, _ = s.slurmCommand(ctx, CheckSqueue, "squeue --me --noheader --states=R --format=%i", "squeue")
	}
	sr := Check{Name: CheckSrun, Status: Skip, Detail: "not run: the reverse tunnel does not use srun (Reverse.Enabled false or NodeExec ssh)"}
	if !srun {
		return sq, sr
	}
	sr, help := s.slurmCommand(ctx, CheckSrun, "srun --help", "srun")
	switch {
	case sr.Status != Pass:
	case !strings.Contains(help, "--overlap"):
		sr = Check{Name: CheckSrun, Status: Fail, Detail: fmt.Sprintf("srun --help on %s names no --overlap, which the reverse tunnel's steps run with", s.ssh.LoginHost),
			Remedy: s.remedy(tunnelstate.ReasonNodeHopRefused) + " srun has --overlap from Slurm 20.11 on."}
	default:
		sr.Detail = fmt.Sprintf("srun on %s knows --overlap", s.ssh.LoginHost)
	}
	return sq, sr
}

// slurmCommand runs one of Slurm's commands on the login node: the check, and what it printed.
func (s *session) slurmCommand(ctx context.Context, name, command, prog string) (Check, string) {
	res := s.remote(ctx, command)
	if res.code == 0 {
		return Check{Name: name, Status: Pass, Detail: fmt.Sprintf("%s ran on %s: %s", command, s.ssh.LoginHost, lastLines(res.out))}, res.out
	}
	why := "is not on the login node's PATH for " + s.ssh.User
	if res.code != 127 && !strings.Contains(res.out, "not found") {
		why = "failed there (Slurm's controller down or not configured for the login node?)"
	}
	remedy := fmt.Sprintf("The shadow runs %s on the login node over its own login: the site's admins make Slurm's client commands work there for %s.", prog, s.ssh.User)
	if name == CheckSqueue && s.ssh.NodeDiscovery == policy.NodeDiscoverySlurm {
		remedy += fmt.Sprintf(" Otherwise the cluster admin sets NodeDiscovery: configmap for virtual node %s, with a virtual kubelet that publishes the compute node.", s.in.Node)
	}
	return Check{Name: name, Status: Fail, Remedy: remedy,
		Detail: fmt.Sprintf("%s %s (status %d): %s", prog, why, res.code, lastLines(res.out))}, res.out
}
