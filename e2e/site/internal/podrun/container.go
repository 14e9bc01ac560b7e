package podrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kubelet limits on the termination message (pkg/kubelet/kuberuntime).
const (
	maxTerminationMessage = 4096
	fallbackLogLines      = 80
	fallbackLogBytes      = 2048
)

// container is one container of a Pod and its successive instances (restarts).
type container struct {
	pod           *Pod
	spec          *corev1.Container
	init, sidecar bool

	// Guarded by pod.mu.
	status corev1.ContainerStatus
	// proc is the running instance's process, nil between instances.
	proc *exec.Cmd
	// exited is closed when the running instance has exited.
	exited chan struct{}
	// execed is closed once the running instance's helper has made its mounts and exec'd
	// the command (helperExecFD).
	execed <-chan struct{}
	// instance counts started instances; logs/<name>-<instance>.log is each one's log.
	instance int
	// backoff is the delay before the next restart; lastBackoff when it was last raised.
	backoff     time.Duration
	lastBackoff time.Time
	// credentials of the container process, kept for exec probes.
	cred     helperSpec
	envCache []string
}

// supervise runs instances of the container until it needs no restart or the pod stops, and
// returns the last exit code (0 for a pod stopped before the container ran).
func (c *container) supervise() int {
	p := c.pod
	for {
		if p.isStopping() {
			return 0
		}
		code, started := c.runOnce()
		if !started {
			return 0 // stopped while waiting to start
		}
		if p.isStopping() || !c.shouldRestart(code) {
			return code
		}
		delay := c.nextBackoff()
		if delay > 0 {
			c.warn(reasonBackOff, fmt.Sprintf("Back-off restarting failed container %s in pod %s_%s(%s)",
				c.spec.Name, p.pod.Name, p.pod.Namespace, p.pod.UID))
			c.setWaiting("CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
				delay, c.spec.Name, p.pod.Name, p.pod.Namespace, p.pod.UID))
			p.cfg.Logf("pod %s: container %s: back-off %s before restart", p.name, c.spec.Name, delay)
			if !p.sleep(delay) {
				return code
			}
		}
	}
}

// shouldRestart applies restartPolicy: sidecars always restart, init containers on failure
// unless Never, containers per the pod's policy.
func (c *container) shouldRestart(code int) bool {
	policy := c.pod.pod.Spec.RestartPolicy
	switch {
	case c.sidecar:
		return true
	case c.init:
		return code != 0 && policy != corev1.RestartPolicyNever
	case policy == corev1.RestartPolicyNever:
		return false
	case policy == corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return true
	}
}

// nextBackoff is the kubelet's crash-loop back-off: the first restart is immediate, then the
// delay starts at InitialBackoff and doubles up to MaxBackoff; it starts over once the
// container has stayed up for twice MaxBackoff since the last raise.
func (c *container) nextBackoff() time.Duration {
	cfg := c.pod.cfg
	now := time.Now()
	c.pod.mu.Lock()
	defer c.pod.mu.Unlock()
	if !c.lastBackoff.IsZero() && now.Sub(c.lastBackoff) > 2*cfg.MaxBackoff {
		c.backoff = 0
	}
	delay := c.backoff
	switch {
	case c.backoff == 0:
		c.backoff = min(cfg.InitialBackoff, cfg.MaxBackoff)
	default:
		c.backoff = min(2*c.backoff, cfg.MaxBackoff)
	}
	c.lastBackoff = now
	return delay
}

// runOnce prepares and runs one instance to its end; started is false if the pod stopped
// before an instance could start.
func (c *container) runOnce() (code int, started bool) {
	p := c.pod
	var spec helperSpec
	for {
		var err error
		spec, err = c.prepare()
		if err == nil {
			break
		}
		reason := "CreateContainerConfigError"
		var noEntry errNoEntrypoint
		if errors.As(err, &noEntry) {
			reason = "CreateContainerError"
		}
		if c.setWaiting(reason, err.Error()) {
			p.cfg.Logf("pod %s: container %s: %s: %v", p.name, c.spec.Name, reason, err)
		}
		if !p.sleep(retryEvery) {
			return 0, false
		}
	}
	// Only the current and the previous instance's logs are kept, as by the kubelet.
	if c.instance >= 2 {
		_ = os.Remove(c.logPath(c.instance - 1))
	}
	log, err := createLog(c.logPath(c.instance + 1))
	if err == nil {
		err = c.startProcess(spec, log)
	}
	if err != nil {
		c.setWaiting("RunContainerError", err.Error())
		p.cfg.Logf("pod %s: container %s: start: %v", p.name, c.spec.Name, err)
		if !p.sleep(retryEvery) {
			return 0, false
		}
		return 1, true
	}
	ctx, cancelProbes := context.WithCancel(context.Background())
	p.mu.Lock()
	execed := c.execed
	p.mu.Unlock()
	go func() {
		select {
		case <-execed: // the mounts are made: probes see the volumes
			c.probe(ctx)
		case <-ctx.Done():
		}
	}()
	waitErr := c.proc.Wait()
	cancelProbes()
	// The container's PID namespace would die with its first process; here its group does.
	_ = syscall.Kill(-c.proc.Process.Pid, syscall.SIGKILL)
	log.close(time.Second)
	code = exitCode(c.proc, waitErr)
	c.recordExit(code)
	return code, true
}

func exitCode(cmd *exec.Cmd, waitErr error) int {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return 128 + int(ws.Signal())
	case cmd.ProcessState != nil:
		return cmd.ProcessState.ExitCode()
	case waitErr != nil:
		return 1
	}
	return 0
}

func (c *container) logPath(instance int) string {
	return filepath.Join(c.pod.cfg.Dir, "logs", fmt.Sprintf("%s-%d.log", c.spec.Name, instance))
}

func (c *container) terminationPath() string {
	return filepath.Join(c.pod.cfg.Dir, "termination", c.spec.Name)
}

// prepare resolves what an instance runs: env, argv, credentials, and mounts.
func (c *container) prepare() (helperSpec, error) {
	p := c.pod
	uid, gid, groups, err := credentials(p.pod, c.spec)
	if err != nil {
		return helperSpec{}, err
	}
	env, err := resolveEnv(p.pod, c.spec, p.cfg.Env, p.cfg.Address, homeOf(uid))
	if err != nil {
		return helperSpec{}, err
	}
	lookup := func(name string) (string, bool) {
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v, true
			}
		}
		return "", false
	}
	args, err := argv(c.spec, lookup)
	if err != nil {
		return helperSpec{}, err
	}
	mounts, err := c.mounts()
	if err != nil {
		return helperSpec{}, err
	}
	dir := c.spec.WorkingDir
	if dir == "" {
		dir = "/"
	}
	return helperSpec{Mounts: mounts, UID: uid, GID: gid, Groups: groups, Dir: dir, Argv: args, Env: env,
		Hostname: podHostname(p.pod)}, nil
}

// credentials are the container's user, group and supplementary groups: the container's
// securityContext over the pod's; fsGroup and supplementalGroups join the groups as the
// kubelet adds them; without runAsGroup the group is the user's passwd group, as runtimes do.
func credentials(pod *corev1.Pod, c *corev1.Container) (uid, gid uint32, groups []uint32, err error) {
	var runAsUser, runAsGroup *int64
	var nonRoot *bool
	if psc := pod.Spec.SecurityContext; psc != nil {
		runAsUser, runAsGroup, nonRoot = psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot
		for _, g := range psc.SupplementalGroups {
			groups = append(groups, uint32(g))
		}
		if psc.FSGroup != nil {
			groups = append(groups, uint32(*psc.FSGroup))
		}
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			runAsUser = csc.RunAsUser
		}
		if csc.RunAsGroup != nil {
			runAsGroup = csc.RunAsGroup
		}
		if csc.RunAsNonRoot != nil {
			nonRoot = csc.RunAsNonRoot
		}
	}
	if runAsUser != nil {
		uid = uint32(*runAsUser)
	}
	if nonRoot != nil && *nonRoot && uid == 0 {
		return 0, 0, nil, fmt.Errorf("container has runAsNonRoot and would run as root (no runAsUser)")
	}
	switch {
	case runAsGroup != nil:
		gid = uint32(*runAsGroup)
	default:
		if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
			g, _ := strconv.Atoi(u.Gid)
			gid = uint32(g)
		}
	}
	return uid, gid, groups, nil
}

// mounts are the container's bind mounts: its volumeMounts (subPath resolved now, as the
// kubelet does at start), /etc/hosts and the termination-message file. Targets the host
// lacks are created for the pod's life (Mountpoints), except those inside another mount of
// this container, which the helper creates inside that volume.
func (c *container) mounts() ([]bindMount, error) {
	p := c.pod
	var out []bindMount
	for _, vm := range c.spec.VolumeMounts {
		src := p.cfg.VolumePath(vm.Name)
		if vm.SubPath != "" {
			if strings.Contains(vm.SubPath, "..") || filepath.IsAbs(vm.SubPath) {
				return nil, fmt.Errorf("volumeMount %s: subPath %q must be relative and without '..'", vm.Name, vm.SubPath)
			}
			resolved, err := filepath.EvalSymlinks(filepath.Join(src, vm.SubPath))
			if os.IsNotExist(err) {
				// The kubelet creates a missing subPath as a directory.
				resolved = filepath.Join(src, vm.SubPath)
				err = os.MkdirAll(resolved, 0o777)
			}
			if err != nil {
				return nil, fmt.Errorf("volumeMount %s subPath %s: %w", vm.Name, vm.SubPath, err)
			}
			src = resolved
		}
		out = append(out, bindMount{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly})
	}
	if !mountsAt(out, "/etc/hosts") && p.cfg.HostsFile != "" {
		out = append(out, bindMount{Source: p.cfg.HostsFile, Target: "/etc/hosts"})
	}
	if tp := c.terminationMessagePath(); tp != "" && !mountsAt(out, tp) {
		host := c.terminationPath()
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			return nil, err
		}
		// Truncated for every instance; world-writable so any container user can write it.
		if err := os.WriteFile(host, nil, 0o666); err != nil {
			return nil, fmt.Errorf("termination message file: %w", err)
		}
		if err := os.Chmod(host, 0o666); err != nil {
			return nil, err
		}
		out = append(out, bindMount{Source: host, Target: tp})
	}
	for _, m := range out {
		if underAnother(m.Target, out) {
			continue
		}
		fi, err := os.Stat(m.Source)
		if err != nil {
			return nil, fmt.Errorf("mount source %s: %w", m.Source, err)
		}
		if err := p.cfg.Mountpoints.Acquire(string(p.pod.UID), m.Target, fi.IsDir()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (c *container) terminationMessagePath() string {
	if c.spec.TerminationMessagePath != "" {
		return c.spec.TerminationMessagePath
	}
	return corev1.TerminationMessagePathDefault
}

func mountsAt(ms []bindMount, target string) bool {
	for _, m := range ms {
		if filepath.Clean(m.Target) == target {
			return true
		}
	}
	return false
}

func underAnother(target string, ms []bindMount) bool {
	for _, m := range ms {
		t := filepath.Clean(m.Target)
		if t != filepath.Clean(target) && strings.HasPrefix(filepath.Clean(target), t+"/") {
			return true
		}
	}
	return false
}

func (c *container) startProcess(spec helperSpec, log *logFile) error {
	p := c.pod
	stdout, err := log.pipe("stdout")
	if err != nil {
		return err
	}
	stderr, err := log.pipe("stderr")
	if err != nil {
		stdout.Close()
		return err
	}
	cmd, execed, err := spec.start(p.cfg.Exe, nil, true, func(cmd *exec.Cmd) {
		cmd.Stdout, cmd.Stderr = stdout, stderr
	})
	// The child holds its copies; ours would keep the log streams from ever ending.
	stdout.Close()
	stderr.Close()
	if err != nil {
		log.close(0)
		return err
	}
	p.mu.Lock()
	c.proc, c.exited, c.execed = cmd, make(chan struct{}), execed
	c.cred = helperSpec{UID: spec.UID, GID: spec.GID, Groups: spec.Groups, Dir: spec.Dir}
	c.envCache = spec.Env
	if c.instance > 0 {
		c.status.RestartCount++
	}
	c.instance++
	if t := c.status.State.Terminated; t != nil {
		c.status.LastTerminationState = corev1.ContainerState{Terminated: t}
	}
	c.status.ContainerID = fmt.Sprintf("site://%s-%s-%d", p.pod.UID, c.spec.Name, c.instance)
	c.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	c.status.Ready = false
	// Without a startup probe a running container is started.
	started := c.spec.StartupProbe == nil
	c.status.Started = &started
	if c.spec.ReadinessProbe == nil && started && !c.init {
		c.status.Ready = true
	}
	if c.sidecar && c.spec.ReadinessProbe == nil {
		c.status.Ready = started
	}
	p.mu.Unlock()
	p.cfg.Logf("pod %s: container %s: started pid %d: %s", p.name, c.spec.Name, cmd.Process.Pid, strings.Join(spec.Argv[:1], " "))
	p.changed()
	return nil
}

// recordExit turns the instance's end into a terminated state, with the termination message.
func (c *container) recordExit(code int) {
	p := c.pod
	msg := c.terminationMessage(code)
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	p.mu.Lock()
	var startedAt metav1.Time
	if r := c.status.State.Running; r != nil {
		startedAt = r.StartedAt
	}
	c.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reason, Message: msg,
		StartedAt: startedAt, FinishedAt: metav1.Now(), ContainerID: c.status.ContainerID,
	}}
	c.status.Ready = false
	f := false
	c.status.Started = &f
	c.proc = nil
	close(c.exited)
	p.mu.Unlock()
	p.cfg.Logf("pod %s: container %s: exited with code %d (%s)", p.name, c.spec.Name, code, reason)
	p.changed()
}

// terminationMessage is the kubelet's: the message file, else (FallbackToLogsOnError, on
// failure) the tail of the log.
func (c *container) terminationMessage(code int) string {
	if b, err := os.ReadFile(c.terminationPath()); err == nil && len(b) > 0 {
		if len(b) > maxTerminationMessage {
			b = b[:maxTerminationMessage]
		}
		return string(b)
	}
	if code == 0 || c.spec.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		return ""
	}
	var tail strings.Builder
	_ = readLog(context.Background(), c.logPath(c.instance), logOpts(fallbackLogLines, fallbackLogBytes), func() bool { return true }, &tail)
	return tail.String()
}

// setWaiting shows the container waiting; the last state becomes the terminated one it leaves.
// It reports whether the state changed (so a retry loop logs once).
func (c *container) setWaiting(reason, message string) bool {
	p := c.pod
	p.mu.Lock()
	if w := c.status.State.Waiting; w != nil && w.Reason == reason && w.Message == message {
		p.mu.Unlock()
		return false
	}
	if t := c.status.State.Terminated; t != nil {
		c.status.LastTerminationState = corev1.ContainerState{Terminated: t}
	}
	c.status.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
	p.mu.Unlock()
	p.changed()
	return true
}

// waitStarted blocks until the (sidecar) container is started or the pod stops.
func (c *container) waitStarted() bool {
	for {
		c.pod.mu.Lock()
		started := c.status.Started != nil && *c.status.Started
		c.pod.mu.Unlock()
		if started {
			return true
		}
		if !c.pod.sleep(50 * time.Millisecond) {
			return false
		}
	}
}

// kill ends the running instance: SIGTERM to its process group, SIGKILL after grace.
func (c *container) kill(grace time.Duration) {
	c.pod.mu.Lock()
	proc, exited := c.proc, c.exited
	c.pod.mu.Unlock()
	if proc == nil {
		return
	}
	pgid := proc.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		c.pod.cfg.Logf("pod %s: container %s: still running %s after SIGTERM, SIGKILL", c.pod.name, c.spec.Name, grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

func (c *container) waitExited() {
	c.pod.mu.Lock()
	proc, exited := c.proc, c.exited
	c.pod.mu.Unlock()
	if proc != nil {
		<-exited
	}
}
