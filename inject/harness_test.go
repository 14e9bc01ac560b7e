package inject

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/internal/syncbuf"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// render builds the shadow of pod under a policy document, failing the test when the policy
// or the pod is refused or no shadow comes out.
func render(t testing.TB, policyDoc string, pod *corev1.Pod) (*Shadow, []string) {
	t.Helper()
	pol, errs := validate.ParsePolicy([]byte(policyDoc), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatalf("test policy refused: %v", errs.ToAggregate())
	}
	o, d := validate.Pod(pod, validate.Config{Policy: pol})
	if !d.Allowed() {
		t.Fatalf("test pod refused: %v", d.Errors.ToAggregate())
	}
	return buildShadow(pod, o)
}

// offloadedPod is a pod on virtual node hpc-vk exposing ports.
func offloadedPod(name, namespace string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: "0b5e3c2a-5d1f-4c1e-9a47-6f0d3f1b2c3d"},
		Spec: corev1.PodSpec{
			NodeName:   "hpc-vk",
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Ports: ports}},
		},
	}
}

// container returns the named container of a Deployment, init or not.
func container(t testing.TB, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	spec := d.Spec.Template.Spec
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the Deployment has no container %s", name)
	return corev1.Container{}
}

// process is a rendered container's script running on this machine.
type process struct {
	cmd    *exec.Cmd
	out    *syncbuf.Buffer
	exited chan struct{}
	err    error
}

// runContainer runs a container's script as it would run in the shadow pod: its command, its
// environment, and each of its volume mounts emulated by a directory of mounts (mount path to
// directory): every mount path in the command and the environment is rewritten to that
// directory. The scripts volume, unless mounts has it, is the rendered scripts ConfigMap
// written out as kubelet writes a ConfigMap volume (scriptsVolumeDir). extraEnv (NAME=value)
// comes last, for the test-only knobs the scripts read.
func runContainer(t testing.TB, c corev1.Container, mounts map[string]string, extraEnv ...string) *process {
	t.Helper()
	mounts = withScriptsVolume(t, c, mounts)
	command := rewriteMounts(t, c, mounts, c.Command)
	p := &process{cmd: exec.Command(command[0], command[1:]...), out: &syncbuf.Buffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(containerEnv(t, c, mounts), extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", c.Name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		// The script stops its own children on TERM; whatever is left goes with the group.
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(3 * time.Second):
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		if t.Failed() {
			t.Logf("%s output:\n%s", c.Name, p.out)
		}
	})
	return p
}

// withScriptsVolume is mounts with the scripts volume's directory added when c mounts it and
// mounts lacks it, and the tmp volume as the host's own /tmp, writable as the emptyDir is
// (a path of its own would be rewritten into every other mount's directory under /tmp).
func withScriptsVolume(t testing.TB, c corev1.Container, mounts map[string]string) map[string]string {
	t.Helper()
	out := maps.Clone(mounts)
	if out == nil {
		out = map[string]string{}
	}
	mountsScripts := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == scriptsDir })
	if _, ok := mounts[scriptsDir]; !ok && mountsScripts {
		out[scriptsDir] = scriptsVolumeDir(t, ScriptsConfigMap("test"))
	}
	out[tmpDir] = tmpDir
	return out
}

// scriptsVolumeDir writes a scripts ConfigMap's files into a new directory, one file a key
// with the volume's default mode (0644), as kubelet does: what the containers read is what
// the ConfigMap holds. The directory's name holds nothing a shell reads as syntax (a test's
// TempDir holds its name, parentheses and all): the containers source their script by a path
// written into the shell's text.
func scriptsVolumeDir(t testing.TB, cm *corev1.ConfigMap) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shadow-scripts-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	for name, text := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// containerEnv is a container's environment as runContainer gives it: PATH, then the
// container's own variables with every mount path rewritten to its emulating directory.
func containerEnv(t testing.TB, c corev1.Container, mounts map[string]string) []string {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH") + ":/usr/sbin", "LANG=C"}
	values := make([]string, len(c.Env))
	for i, e := range c.Env {
		values[i] = e.Value
	}
	for i, v := range rewriteMounts(t, c, mounts, values) {
		env = append(env, c.Env[i].Name+"="+v)
	}
	return env
}

// rewriteMounts returns values with every mount path of c rewritten to its emulating
// directory, failing the test for a mount mounts lacks.
func rewriteMounts(t testing.TB, c corev1.Container, mounts map[string]string, values []string) []string {
	t.Helper()
	paths := make([]string, 0, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		if _, ok := mounts[m.MountPath]; !ok {
			t.Fatalf("container %s mounts %s, which the test does not emulate", c.Name, m.MountPath)
		}
		paths = append(paths, m.MountPath)
	}
	// Longest first, so a mount inside another is rewritten as itself.
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	out := make([]string, len(values))
	for i, v := range values {
		for _, p := range paths {
			v = strings.ReplaceAll(v, p, mounts[p])
		}
		out[i] = v
	}
	return out
}

// wait returns the exit code once the process ends, failing the test after timeout.
func (p *process) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("still running after %s; output:\n%s", timeout, p.out)
		return -1
	}
}

// expectFailure waits for the process to exit, fails the test at once when it exited 0 (saying
// why that is wrong), and reports every line of wants its output lacks.
func (p *process) expectFailure(t *testing.T, timeout time.Duration, whyNotZero string, wants ...string) {
	t.Helper()
	if code := p.wait(t, timeout); code == 0 {
		t.Fatalf("exit code 0: %s", whyNotZero)
	}
	for _, want := range wants {
		if !strings.Contains(p.out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, p.out)
		}
	}
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// children returns the pids of the process's direct children whose command is comm.
func (p *process) children(t *testing.T, comm string) []int {
	t.Helper()
	var pids []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/task/*/children")
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(data)) {
			pid, _ := strconv.Atoi(field)
			name, _ := os.ReadFile("/proc/" + field + "/comm")
			if strings.TrimSpace(string(name)) == comm {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// eventually retries check every 50ms until it returns nil, failing the test with its last
// error after timeout.
func eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeAtomically replaces a file the way kubelet updates a mounted ConfigMap: readers see
// the old content or the new, never a part.
func writeAtomically(t testing.TB, name, content string) {
	t.Helper()
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

// loginPolicy is a one-node policy whose SSH shadow logs in to login as user with the key
// Secret login-key, plus the SSH options sshLines gives (one "Key: value" a line).
func loginPolicy(login *sshtest.Server, user, sshLines string) string {
	doc := fmt.Sprintf("virtualNodes:\n  hpc-vk:\n    Network:\n      EnableTunnel: true\n      ShadowMode: ssh\n      SSH:\n"+
		"        LoginHost: %s\n        Port: %d\n        User: %s\n        KeySecret: login-key\n", login.Host, login.Port, user)
	for _, line := range strings.Split(strings.TrimSpace(sshLines), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			doc += "        " + line + "\n"
		}
	}
	return doc
}

// examplePolicy is manifests/examples/policy.yaml parsed as serve would parse it.
func examplePolicy(tb testing.TB) *policy.Policy {
	tb.Helper()
	doc, err := os.ReadFile("../manifests/examples/policy.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	pol, errs := validate.ParsePolicy(doc, validate.CredentialRules{})
	if len(errs) > 0 {
		tb.Fatalf("the example policy is refused: %v", errs.ToAggregate())
	}
	return pol
}
