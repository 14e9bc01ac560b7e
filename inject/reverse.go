package inject

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Environment ssh-reverse and reverse-hop read, besides what every ssh container gets.
const (
	EnvReverseBind         = "SHADOW_REVERSE_BIND"
	EnvReverseForwards     = "SHADOW_REVERSE_FORWARDS" // one "<listen port> <host> <port>" a line
	EnvReverseSocksPort    = "SHADOW_REVERSE_SOCKS_PORT"
	EnvReverseSshd         = "SHADOW_REVERSE_SSHD"
	EnvReverseSshdPath     = "SHADOW_REVERSE_SSHD_PATH"
	EnvReverseNodeExec     = "SHADOW_REVERSE_NODE_EXEC"
	EnvReverseJobName      = "SHADOW_REVERSE_JOB_NAME"
	EnvReversePython       = "SHADOW_REVERSE_PYTHON"        // with srun: runs the byte relay on the node
	EnvReverseLoginOptions = "SHADOW_REVERSE_LOGIN_OPTIONS" // first on the login hop of srun
	EnvReverseHop          = "SHADOW_REVERSE_HOP"
	EnvReverseNodeScript   = "SHADOW_REVERSE_NODE_SCRIPT"
)

var (
	scriptReverse    = shadowScript("ssh-reverse.sh")
	scriptReverseHop = shadowScript("reverse-hop.sh")
	// reverse-node.sh is sent to the compute node's shell, which has none of the shadow's functions.
	scriptReverseNode = mustScript("reverse-node.sh")
)

// reverseContainer is ssh-reverse: it shares the login, options and credential mounts of
// ssh-forward, and dials each forward's DialHost, so a bare Service name reaches the pod's
// namespace rather than the shadow's. The pod has been through the mutating phase (Admit checks it), so o.Bind is set.
func (b *builder) reverseContainer() corev1.Container {
	rev := &b.ssh.Reverse
	forwards := make([]string, 0, len(b.o.Forwards))
	for _, f := range b.o.Forwards {
		forwards = append(forwards, strconv.Itoa(f.ListenPort)+" "+f.DialHost+" "+strconv.Itoa(f.Port))
	}
	extra := []corev1.EnvVar{
		env(EnvReverseBind, b.o.Bind.String()),
		env(EnvReverseForwards, strings.Join(forwards, "\n")),
		env(EnvReverseSshd, rev.Sshd),
		env(EnvReverseSshdPath, rev.SshdPath),
		env(EnvReverseNodeExec, rev.NodeExec),
		env(EnvForwardMode, b.ssh.ForwardMode),
	}
	if !b.slurmDiscovery() {
		// The plugin names the batch job after the pod's UID; srun mode finds it by that name
		// (sshContainer sets it for Slurm discovery).
		extra = append(extra, env(EnvReverseJobName, string(b.pod.UID)))
	}
	if b.o.SocksPort > 0 {
		extra = append(extra, env(EnvReverseSocksPort, strconv.Itoa(b.o.SocksPort)))
	}
	if b.ssh.ForwardMode == policy.ForwardModeExec {
		extra = append(extra, env(EnvExecConnect, b.ssh.ExecConnectCommand))
	}
	if rev.NodeExec == policy.NodeExecSrun {
		// The session to the node's sshd goes through srun too, by the job's python.
		extra = append(extra, env(EnvReversePython, rev.PythonPath))
		// srun on the login node may need the ticket; no other hop gets it.
		if b.ssh.Auth == policy.AuthKerberos {
			extra = append(extra, env(EnvReverseLoginOptions, "GSSAPIDelegateCredentials=yes"))
		}
	}
	extra = append(extra, env(EnvReverseHop, scriptReverseHop.text), env(EnvReverseNodeScript, scriptReverseNode.text))
	return b.sshContainer(ContainerReverse, scriptReverse, extra...)
}
