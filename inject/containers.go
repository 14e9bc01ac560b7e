package inject

import (
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Container names (DESIGN.md "Shadow objects").
const (
	containerWaitForNode = "wait-for-node"
	containerWaitReason  = "wait-reason"
	containerKinit       = "kinit"
	containerForward     = "ssh-forward"
	containerKrbRefresh  = "krb-refresh"
	ContainerReverse     = "ssh-reverse"
)

// Volumes of the shadow pod and where they are mounted. Scripts learn every path from their
// environment, so a test can mount them anywhere.
const (
	volumeNode       = "node"
	volumeState      = "state"
	volumeKey        = "ssh-key"
	volumeKeytab     = "keytab"
	volumeKrb5Conf   = "krb5-conf"
	volumeKnownHosts = "known-hosts"
	volumeTmp        = "tmp"

	// mountRoot holds every read-only volume of the shadow pod: a directory of shadowgate's
	// own name, which no Debian package ships. Not /etc/shadow: that is the password file in
	// every Debian image, and a runtime refuses a mount below a file ("not a directory").
	mountRoot = "/etc/interlink-shadow"
	nodeDir   = mountRoot + "/node"
	stateDir  = "/run/shadow" // writable: learned host keys, control socket, ticket cache
	// tmpDir is writable under the read-only root: the shells put a here-document or
	// here-string over a pipe's 64 KiB in a file there, and common.sh's any_uid puts the
	// passwd entry of a uid the image does not name there.
	tmpDir        = "/tmp"
	keyDir        = mountRoot + "/ssh"
	keytabDir     = mountRoot + "/kerberos"
	knownHostsDir = mountRoot + "/known-hosts"
	// krb5ConfDir holds the Krb5ConfigMap as a directory, not as a subPath over
	// /etc/krb5.conf: the kubelet updates a directory mount in place when the ConfigMap (or
	// its copy, which follows the source) changes, and never a subPath one. KRB5_CONFIG points
	// the Kerberos library at it.
	krb5ConfDir = mountRoot + "/krb5"

	keyFile        = "id"
	keytabFile     = "keytab"
	knownHostsKey  = "known_hosts" // the key ssh-keyscan output is stored under, as the guide does
	krb5ConfKey    = "krb5.conf"
	krbRefreshSecs = 3600 // well inside the usual 10-hour ticket lifetime
	// slurmPollSecs is how often a shadow container under NodeDiscovery slurm asks Slurm where
	// the job runs: each time one ssh login to the login node and two queries to slurmctld.
	slurmPollSecs = 30
)

// Environment the scripts read.
const (
	envLoginHost      = "SHADOW_LOGIN_HOST"
	envSSHOptions     = "SHADOW_SSH_OPTIONS" // one ssh -o option a line
	envNodeFile       = "SHADOW_NODE_FILE"
	envNodeDiscovery  = "SHADOW_NODE_DISCOVERY" // configmap | slurm: where current_node looks
	envSlurmPoll      = "SHADOW_SLURM_POLL_INTERVAL"
	envStateDir       = "SHADOW_STATE_DIR"
	envKrb5CCName     = "KRB5CCNAME"
	envKrb5Config     = "KRB5_CONFIG"
	EnvForwardMode    = "SHADOW_FORWARD_MODE"
	envPorts          = "SHADOW_PORTS"
	envExecConnect    = "SHADOW_EXEC_CONNECT_COMMAND"
	envExecRelay      = "SHADOW_EXEC_RELAY"    // the path of exec-relay.sh
	envExecLogins     = "SHADOW_EXEC_LOGINS"   // the most logins exec mode opens
	envExecSessions   = "SHADOW_EXEC_SESSIONS" // relayed connections per login
	envNodeConfigMap  = "SHADOW_NODE_CONFIGMAP"
	envNodeWait       = "SHADOW_NODE_WAIT_TIMEOUT"
	envNodeWaitSecs   = "SHADOW_NODE_WAIT_SECONDS"
	envKrbPrincipal   = "SHADOW_KRB_PRINCIPAL"
	envKrbKeytab      = "SHADOW_KRB_KEYTAB"
	envKrbRefreshSecs = "SHADOW_KRB_REFRESH_SECONDS"
	// envTerminationLog names the file a script that exits on a failure writes its reason
	// line to (common.sh: fail): the container's TerminationMessagePath.
	envTerminationLog = "SHADOW_TERMINATION_LOG"
	// The policy's names for the credential and the known hosts, which the scripts' reason
	// lines name (common.sh: failure_message); nothing but a log line reads them.
	envKeySecret           = "SHADOW_KEY_SECRET"
	envKnownHostsConfigMap = "SHADOW_KNOWN_HOSTS_CONFIGMAP"
	// envBastion is user@host:port of SSH.Bastion, for the reason lines to tell a failure of
	// the hop from one of the login node; the ProxyCommand in SHADOW_SSH_OPTIONS makes the hop.
	envBastion = "SHADOW_BASTION"
)

// The readiness probe of the long-running containers (scripts/tunnel-probe.sh) reads the
// status file the container's script keeps under the state directory, status/<name>.
const statusDir = "status"

var scriptProbe = mustScript("tunnel-probe.sh")

// waitForNodeContainer holds the pod in Init:0/N until the compute node is known, which is the
// normal state while the job is queued: until the virtual kubelet publishes it in the node
// ConfigMap, or, with NodeDiscovery slurm, until Slurm reports the job running, which it asks
// over the login node with the same login as ssh-forward.
func (b *builder) waitForNodeContainer() corev1.Container {
	wait := []corev1.EnvVar{
		env(envNodeWait, b.ssh.NodeWaitTimeout),
		env(envNodeWaitSecs, strconv.Itoa(int(b.ssh.NodeWait().Seconds()))),
	}
	if b.slurmDiscovery() {
		return b.sshContainer(containerWaitForNode, scriptWaitForNode, wait...)
	}
	c := b.container(containerWaitForNode, scriptWaitForNode, append([]corev1.EnvVar{
		env(envNodeDiscovery, b.ssh.NodeDiscovery),
		env(envNodeFile, path.Join(nodeDir, validate.ComputeNodeKey)),
		env(envNodeConfigMap, b.namespaceName+"/"+NodeConfigMapName(b.name)),
	}, wait...)...)
	c.VolumeMounts = append(c.VolumeMounts, b.nodeMount())
	return c
}

// waitReasonContainer is the native sidecar, declared before wait-for-node under NodeDiscovery
// slurm, that carries Slurm's reason and expected start for the queued job to the kubelet's
// Events (scripts/wait-reason.sh): its readiness probe fails once per change of what
// wait-for-node logged, printing it, and passes otherwise. It idles for the pod's life, as a
// sidecar cannot end, at the cost of a sleeping shell and a probe reading one file every 10 s.
// The pod is Ready only with its sidecars: a probe that failed as the node was found leaves it
// NotReady for at most one period, shorter than the tunnel's own first check.
func (b *builder) waitReasonContainer() corev1.Container {
	c := b.container(containerWaitReason, scriptWaitReason, env(envStateDir, stateDir))
	c.VolumeMounts = append(c.VolumeMounts, b.stateMount())
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: runScript(scriptWaitReason, containerWaitReason, "probe")}},
		PeriodSeconds:    10,
		TimeoutSeconds:   3,
		FailureThreshold: 1,
		SuccessThreshold: 1,
	}
	return c
}

// slurmDiscovery reports whether the shadow asks Slurm for the compute node (NodeDiscovery
// slurm) rather than reading the node ConfigMap.
func (b *builder) slurmDiscovery() bool { return b.ssh.NodeDiscovery == policy.NodeDiscoverySlurm }

// forwardContainer carries the cluster-to-pod traffic: ssh -L per port, or socat listeners
// relaying through ExecConnectCommand on the login node.
func (b *builder) forwardContainer() corev1.Container {
	ports := make([]string, 0, len(b.ports))
	containerPorts := make([]corev1.ContainerPort, 0, len(b.ports))
	for _, p := range b.ports {
		ports = append(ports, strconv.Itoa(int(p.Port)))
		containerPorts = append(containerPorts, corev1.ContainerPort{Name: p.Name, ContainerPort: p.Port, Protocol: corev1.ProtocolTCP})
	}
	extra := []corev1.EnvVar{env(EnvForwardMode, b.ssh.ForwardMode), env(envPorts, strings.Join(ports, " "))}
	if b.ssh.ForwardMode == policy.ForwardModeExec {
		// One channel of each login is left for the tunnel's checks.
		extra = append(extra, env(envExecConnect, b.ssh.ExecConnectCommand), env(envExecRelay, scriptPath(scriptExecRelay)),
			env(envExecLogins, strconv.Itoa(b.ssh.ExecMaxLogins)), env(envExecSessions, strconv.Itoa(b.ssh.ExecSessionsPerLogin-1)))
	}
	c := b.sshContainer(containerForward, scriptForward, extra...)
	c.Ports = containerPorts
	c.ReadinessProbe = statusProbe(containerForward)
	return c
}

// kinitContainer gets the first ticket, so ssh-forward starts with one.
func (b *builder) kinitContainer() corev1.Container {
	return b.kerberosContainer(containerKinit)
}

// krbRefreshContainer renews the ticket for the life of the tunnel.
func (b *builder) krbRefreshContainer() corev1.Container {
	c := b.kerberosContainer(containerKrbRefresh, env(envKrbRefreshSecs, strconv.Itoa(krbRefreshSecs)))
	c.ReadinessProbe = statusProbe(containerKrbRefresh)
	return c
}

func (b *builder) kerberosContainer(name string, extra ...corev1.EnvVar) corev1.Container {
	b.addVolume(secretVolume(volumeKeytab, b.ssh.KeytabSecret, b.ssh.KeytabSecretKey, keytabFile))
	confMounts, confEnv := b.krb5Conf()
	c := b.container(name, scriptKerberos, append(append([]corev1.EnvVar{
		env(envKrbPrincipal, b.ssh.Principal),
		env(envKrbKeytab, path.Join(keytabDir, keytabFile)),
		env(envKrb5CCName, "FILE:"+path.Join(stateDir, "krb5cc")),
		env(envStateDir, stateDir),
	}, confEnv...), extra...)...)
	c.VolumeMounts = append(append(c.VolumeMounts, b.stateMount(), corev1.VolumeMount{Name: volumeKeytab, MountPath: keytabDir, ReadOnly: true}), confMounts...)
	return c
}

// sshContainer is a container running an embedded script that logs in to the login node,
// with what every such container shares: the login host, the ssh options (one a line in
// SHADOW_SSH_OPTIONS), how the compute node is found (the node file, or Slurm's job named
// after the pod UID), a writable state directory, the Kerberos ticket cache, and the mounts
// these need. extra is appended to that environment.
func (b *builder) sshContainer(name string, s script, extra ...corev1.EnvVar) corev1.Container {
	envs := []corev1.EnvVar{
		env(envLoginHost, b.ssh.LoginHost),
		env(envSSHOptions, strings.Join(SSHOptions(b.ssh, b.credentialFiles()), "\n")),
		env(envNodeDiscovery, b.ssh.NodeDiscovery),
		env(envNodeFile, path.Join(nodeDir, validate.ComputeNodeKey)),
		env(envStateDir, stateDir),
	}
	if bh := b.ssh.Bastion; bh.Host != "" {
		envs = append(envs, env(envBastion, b.ssh.BastionUser()+"@"+bh.Host+":"+strconv.Itoa(bh.Port)))
	}
	if b.slurmDiscovery() {
		// The plugin names the batch job after the pod's UID; the lookup finds it by that name,
		// as reverse-hop's srun does.
		envs = append(envs, env(envReverseJobName, string(b.pod.UID)), env(envSlurmPoll, strconv.Itoa(slurmPollSecs)))
	}
	mounts := []corev1.VolumeMount{b.nodeMount(), b.stateMount()}
	if b.ssh.Auth == policy.AuthKerberos {
		confMounts, confEnv := b.krb5Conf()
		envs = append(append(envs, env(envKrb5CCName, "FILE:"+path.Join(stateDir, "krb5cc")), env(envKrbPrincipal, b.ssh.Principal)), confEnv...)
		mounts = append(mounts, confMounts...)
	} else {
		envs = append(envs, env(envKeySecret, b.ssh.KeySecret))
		b.addVolume(secretVolume(volumeKey, b.ssh.KeySecret, b.ssh.KeySecretKey, keyFile))
		mounts = append(mounts, corev1.VolumeMount{Name: volumeKey, MountPath: keyDir, ReadOnly: true})
	}
	if b.ssh.KnownHostsConfigMap != "" {
		envs = append(envs, env(envKnownHostsConfigMap, b.ssh.KnownHostsConfigMap))
		b.addVolume(configMapVolume(volumeKnownHosts, b.ssh.KnownHostsConfigMap, knownHostsKey))
		mounts = append(mounts, corev1.VolumeMount{Name: volumeKnownHosts, MountPath: knownHostsDir, ReadOnly: true})
	}
	c := b.container(name, s, append(envs, extra...)...)
	c.VolumeMounts = append(c.VolumeMounts, mounts...)
	return c
}

// container is the part every shadow container shares: the image, the embedded script run
// by its shell from the scripts volume, which it mounts, the restricted security context and
// resource requests.
func (b *builder) container(name string, s script, envs ...corev1.EnvVar) corev1.Container {
	b.addVolume(scriptsVolume())
	b.addVolume(corev1.Volume{Name: volumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("16Mi")),
	}}})
	return corev1.Container{
		Name:                     name,
		Image:                    b.ssh.Image,
		Command:                  runScript(s, name),
		VolumeMounts:             []corev1.VolumeMount{scriptsMount(), {Name: volumeTmp, MountPath: tmpDir}},
		Env:                      append(slices.Clip(envs), env(envTerminationLog, corev1.TerminationMessagePathDefault)),
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		// Non-root and seccomp are set for the whole pod; these exist per container only.
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// statusProbe is the readiness probe of a long-running container: tunnel-probe.sh on the
// status file the container's script keeps. The probe costs a shell reading one file every
// 10 s and opens nothing: the script's own check loop does the work (ssh-forward: one control
// message and one channel per port over its session every SHADOW_CHECK_INTERVAL, default
// 10 s, no new login; ssh-reverse: the node's keepalive line on its session; krb-refresh: the
// last renewal), so a failure shows within a check interval and a probe period. A failed probe
// takes the shadow out of its Service and its output becomes the pod's Unhealthy Event, which
// shadowgate reads. No liveness probe: ssh's ServerAlive ends a session the login node stopped
// answering, and the script then rebuilds it or exits for Kubernetes to restart, while a
// restart cannot fix what the probe reports (forwarding refused, a port nothing listens on, a
// job not running), and would only drop the connections that still work.
func statusProbe(name string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: runScript(scriptProbe, "tunnel-probe", path.Join(stateDir, statusDir, name)),
		}},
		PeriodSeconds:    10,
		TimeoutSeconds:   3,
		FailureThreshold: 1,
		SuccessThreshold: 1,
	}
}

func (b *builder) nodeMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: volumeNode, MountPath: nodeDir, ReadOnly: true}
}

func (b *builder) stateMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: volumeState, MountPath: stateDir}
}

// krb5Conf mounts the policy's Krb5ConfigMap, when it names one, and points KRB5_CONFIG at it
// in place of the image's /etc/krb5.conf.
func (b *builder) krb5Conf() ([]corev1.VolumeMount, []corev1.EnvVar) {
	if b.ssh.Krb5ConfigMap == "" {
		return nil, nil
	}
	b.addVolume(configMapVolume(volumeKrb5Conf, b.ssh.Krb5ConfigMap, krb5ConfKey))
	return []corev1.VolumeMount{{Name: volumeKrb5Conf, MountPath: krb5ConfDir, ReadOnly: true}},
		[]corev1.EnvVar{env(envKrb5Config, path.Join(krb5ConfDir, krb5ConfKey))}
}

// secretVolume projects one key of a Secret, owned by root and readable by its group only:
// the pod's fsGroup, which the kubelet gives the file, or, without one, root's group, which an
// arbitrary uid of OpenShift's restricted SCCs has. ssh accepts a key with group bits when
// another user owns it, and refuses it only when the file is its own.
func secretVolume(name, secret, key, file string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  secret,
		Items:       []corev1.KeyToPath{{Key: key, Path: file}},
		DefaultMode: ptr.To[int32](0o440),
	}}}
}

func configMapVolume(name, configMap, key string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
		Items:                []corev1.KeyToPath{{Key: key, Path: key}},
	}}}
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }
