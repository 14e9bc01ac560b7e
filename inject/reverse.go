package inject

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Environment ssh-reverse and reverse-hop read, besides what every ssh container gets.
const (
	envReverseBind         = "SHADOW_REVERSE_BIND"
	envReverseForwards     = "SHADOW_REVERSE_FORWARDS" // one "<listen port> <host> <port>" a line
	envReverseSocksPort    = "SHADOW_REVERSE_SOCKS_PORT"
	envReverseSshd         = "SHADOW_REVERSE_SSHD"
	envReverseSshdPath     = "SHADOW_REVERSE_SSHD_PATH"
	envReverseNodeExec     = "SHADOW_REVERSE_NODE_EXEC"
	envReverseJobName      = "SHADOW_REVERSE_JOB_NAME"
	envReversePython       = "SHADOW_REVERSE_PYTHON"        // with srun: runs the byte relay on the node
	envReverseLoginOptions = "SHADOW_REVERSE_LOGIN_OPTIONS" // first on the login hop of srun
	envReverseHop          = "SHADOW_REVERSE_HOP"           // the path of reverse-hop.sh
	envReverseNodeScript   = "SHADOW_REVERSE_NODE_SCRIPT"   // the path of reverse-node.sh
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
		env(envReverseBind, b.o.Bind.String()),
		env(envReverseForwards, strings.Join(forwards, "\n")),
		env(envReverseSshd, rev.Sshd),
		env(envReverseSshdPath, rev.SshdPath),
		env(envReverseNodeExec, rev.NodeExec),
		env(EnvForwardMode, b.ssh.ForwardMode),
	}
	if !b.slurmDiscovery() {
		// The plugin names the batch job after the pod's UID; srun mode finds it by that name
		// (sshContainer sets it for Slurm discovery).
		extra = append(extra, env(envReverseJobName, string(b.pod.UID)))
	}
	if b.o.SocksPort > 0 {
		extra = append(extra, env(envReverseSocksPort, strconv.Itoa(b.o.SocksPort)))
	}
	if b.ssh.ForwardMode == policy.ForwardModeExec {
		extra = append(extra, env(envExecConnect, b.ssh.ExecConnectCommand))
	}
	if rev.NodeExec == policy.NodeExecSrun {
		// The session to the node's sshd goes through srun too, by the job's python.
		extra = append(extra, env(envReversePython, rev.PythonPath))
		// srun on the login node may need the ticket; no other hop gets it.
		if b.ssh.Auth == policy.AuthKerberos {
			extra = append(extra, env(envReverseLoginOptions, "GSSAPIDelegateCredentials=yes"))
		}
	}
	extra = append(extra, env(envReverseHop, scriptPath(scriptReverseHop)), env(envReverseNodeScript, scriptPath(scriptReverseNode)))
	c := b.sshContainer(ContainerReverse, scriptReverse, extra...)
	c.ReadinessProbe = statusProbe(ContainerReverse)
	return c
}
