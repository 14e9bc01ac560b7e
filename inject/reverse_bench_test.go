package inject

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// BenchmarkTunnelReverse measures the reverse tunnel as deployed: the job's pre-exec and
// relay (owner-only, ending in the session's unix-socket forwards), and the shadow's
// ssh-reverse holding the session through the login node, with the node's sshd as carrier
// reached by ssh (NodeExec ssh) or by srun in a real Slurm job (NodeExec srun). The job's user
// connects to the relay on the node; the far end is a benchServer in the "cluster". Beside
// it, interleaved round by round: the plain ssh -R an admin would run to the same node sshd
// with the same options, to a TCP port ("plain-"), and the same through the login node inside
// a second ssh (ssh -W as ProxyCommand), the double hop the deployed session takes ("hop-").
// Then, once through each, the CPU per MiB carried of each program the bytes pass through
// (measureBulkCPU). With NodeExec ssh, also the write-write-read request and a reply in two
// writes through a relay without TCP_NODELAY.
func BenchmarkTunnelReverse(b *testing.B) {
	for _, carrier := range []string{policy.NodeExecSSH, policy.NodeExecSrun} {
		b.Run(carrier, func(b *testing.B) {
			s := newReverseSite(b, reverseOptions{sshd: policy.SshdNode, nodeExec: carrier, bench: true})
			path := s.benchTunnel(b)
			plain, hop := s.plainReverse(b)
			rounds := measureInterleaved(b, path, plain, hop)
			pairedFigures{path: rounds[0], base: rounds[1]}.report(b)
			reportFigures(b, "hop-", rounds[2])
			reportBulkCPU(b, []string{"tunnel-", "plain-", "hop-"}, path, plain, hop)
			if carrier == policy.NodeExecSSH {
				reportNagle(b, path)
			}
		})
	}
}

// benchTunnel runs the job and the shadow's ssh-reverse, and returns the relay's address once
// a connection of the job's user gets through it to the benchServer. env, added to what the
// plugin gives the job, runs it in a shell (NodeExec ssh) rather than as s.runJob does.
func (s *reverseSite) benchTunnel(b *testing.B, env ...string) string {
	b.Helper()
	var job jobRun
	if len(env) == 0 {
		job = s.runJob(b)
	} else {
		job = s.startJob(b, env...)
	}
	shadow := s.startShadow(b)
	s.waitReady(b, job)
	addr := net.JoinHostPort(s.bind, strconv.Itoa(s.listen))
	connectAs(b, addr, s.job.uid)
	waitForPath(b, addr, shadow)
	// The relay asked sock_diag at start; measured with /proc/net/tcp, it would not be the
	// relay as a node with sock_diag runs it.
	if out := job.output(); strings.Contains(out, "sock_diag is unavailable") {
		b.Fatalf("the relay finds owners in /proc/net/tcp here:\n%s", out)
	}
	return addr
}

// plainReverse starts the two baselines beside the shadow's session, each with the options of
// the ssh-reverse container, as the job's user, to the node's sshd, forwarding a TCP port on
// the node's 127.0.0.1 to the benchServer: plain, straight to the node; hop, through the
// login node with ssh -W as the session's ProxyCommand. It returns their addresses.
func (s *reverseSite) plainReverse(b *testing.B) (plain, hop string) {
	b.Helper()
	options := plainOptions(b, container(b, s.shadow.Deployment, ContainerReverse), s.mounts)
	// ssh keeps the first value of an option: the node's port and host key go first.
	node := []string{"-o", "UserKnownHostsFile=" + s.node.KnownHosts, "-o", "Port=" + strconv.Itoa(s.node.Port)}
	listen := func() string {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(sshtest.FreePort(b, "127.0.0.1")))
	}
	session := func(extra []string, addr string) {
		args := append(append(append(append([]string{"-N"}, extra...), node...), options...), "-R", addr+":"+s.echo, "--", s.node.Host)
		startPlain(b, args...)
		connectAs(b, addr, s.job.uid)
		waitForPath(b, addr, nil)
	}
	plain = listen()
	session(nil, plain)
	jump := []string{"ssh"}
	for _, o := range options {
		jump = append(jump, shellQuote(o))
	}
	jump = append(jump, "-W", "%h:%p", "--", s.login.Host)
	hop = listen()
	session([]string{"-o", "ProxyCommand=" + strings.Join(jump, " ")}, hop)
	return plain, hop
}

// reportNagle measures the write-write-read request through the relay of path, which sets
// TCP_NODELAY, and through a second tunnel whose relay leaves Nagle's algorithm on
// (SHADOW_RELAY_NODELAY=0), alternately for benchRounds rounds: "relay-nodelay-" and "relay-nagle-";
// and the same with the answer in two writes (opSplitReply), where the relay's own sends are
// what Nagle's algorithm holds.
func reportNagle(b *testing.B, path string) {
	b.Helper()
	s := newReverseSite(b, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH, bench: true})
	nagle := s.benchTunnel(b, "SHADOW_RELAY_NODELAY=0")
	for _, fig := range []struct {
		op   byte
		name string
	}{{opRequest, "wwr"}, {opSplitReply, "split-reply"}} {
		var nodelay, held []time.Duration
		for round := range benchRounds(b) {
			order := []string{path, nagle}
			if round%2 == 1 {
				order = []string{nagle, path}
			}
			for _, addr := range order {
				d, err := measureRequestsOp(addr, fig.op)
				if err != nil {
					b.Fatalf("%s through %s: %v", fig.name, addr, err)
				}
				if addr == path {
					nodelay = append(nodelay, d)
				} else {
					held = append(held, d)
				}
			}
		}
		b.ReportMetric(float64(medianDuration(nodelay))/1e3, "relay-nodelay-"+fig.name+"-p50-us")
		b.ReportMetric(float64(medianDuration(held))/1e3, "relay-nagle-"+fig.name+"-p50-us")
	}
}

// shellQuote quotes a word for sh, as ssh runs a ProxyCommand.
func shellQuote(w string) string { return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'" }
