package podrun

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestEnvIsResolvedAsTheKubeletDoes(t *testing.T) {
	w := newWorld(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "ns"}, Data: map[string][]byte{"token": []byte("s3cret")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "ns"}, Data: map[string]string{"MODE": "fast", "bad-name": "x"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.3.4", Ports: []corev1.ServicePort{{Port: 5432, Protocol: corev1.ProtocolTCP}}}},
	)
	optional := true
	c := sh("env", `echo "$TOKEN|$MODE|$GREETING|$POD|$LABEL|$NODE|$IP|$MISSING|$HOSTNAME|$DB_SERVICE_HOST|$1|$(hostname)"`)
	c.Args = []string{"$(GREETING)"}
	c.Command = append(c.Command, "argv0")
	c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	c.Env = []corev1.EnvVar{
		{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}},
		{Name: "GREETING", Value: "hello-$(MODE)-$$(MODE)-$(UNDEFINED)"},
		{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "LABEL", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "MISSING", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k", Optional: &optional}}},
	}
	pod := testPod("envpod", corev1.PodSpec{NodeName: "cluster-node", RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c}})
	pod.Labels = map[string]string{"app": "demo"}
	p := run(t, w, pod)
	eventually(t, "pod succeeded", func() bool { return p.Status().Phase == corev1.PodSucceeded })
	got := strings.TrimSpace(logsOf(t, p, "env", api.ContainerLogOpts{}))
	want := "s3cret|fast|hello-fast-$(MODE)-$(UNDEFINED)|envpod|demo|cluster-node|127.0.0.1||envpod|10.0.3.4|hello-fast-$(MODE)-$(UNDEFINED)|envpod"
	if got != want {
		t.Errorf("container env:\n got %s\nwant %s", got, want)
	}
}

func TestAMissingSecretKeepsTheContainerWaitingUntilItExists(t *testing.T) {
	w := newWorld()
	c := sh("main", `echo "$TOKEN"`)
	c.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "late"}, Key: "token"}}}}
	p := run(t, w, testPod("late", corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c}}))
	eventually(t, "CreateContainerConfigError", func() bool {
		wt := containerStatus(p.Status(), "main").State.Waiting
		return wt != nil && wt.Reason == "CreateContainerConfigError" && strings.Contains(wt.Message, `late`)
	})
	w.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "ns"}, Data: map[string][]byte{"token": []byte("arrived")}})
	eventually(t, "pod succeeded", func() bool { return p.Status().Phase == corev1.PodSucceeded })
	if got := logsOf(t, p, "main", api.ContainerLogOpts{}); got != "arrived\n" {
		t.Errorf("log %q, want the Secret's value", got)
	}
}

func TestACrashingContainerRestartsWithBackOff(t *testing.T) {
	c := sh("crash", "echo run; exit 3")
	p := run(t, newWorld(), testPod("crashloop", corev1.PodSpec{Containers: []corev1.Container{c}}))
	sawBackOff := false
	eventually(t, "three restarts", func() bool {
		cs := containerStatus(p.Status(), "crash")
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" && strings.Contains(w.Message, "back-off") {
			sawBackOff = true
			if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 || lt.Reason != "Error" {
				t.Fatalf("waiting in back-off with lastState %+v, want terminated with code 3", cs.LastTerminationState)
			}
		}
		return cs.RestartCount >= 3
	})
	if !sawBackOff {
		t.Error("never saw CrashLoopBackOff between restarts")
	}
	p.eventuallyRecords(t, Event{FieldPath: "spec.containers{crash}", Type: corev1.EventTypeWarning, Reason: "BackOff",
		Message: "Back-off restarting failed container crash in pod crashloop_ns(uid-crashloop)"})
	if got := logsOf(t, p, "crash", api.ContainerLogOpts{Previous: true}); got != "run\n" {
		t.Errorf("previous log %q", got)
	}
	if st := p.Status(); st.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running while it restarts", st.Phase)
	}
}

func TestRestartPolicyDecidesTheEnd(t *testing.T) {
	for name, tc := range map[string]struct {
		policy corev1.RestartPolicy
		script string
		phase  corev1.PodPhase
	}{
		"a failure under Never fails the pod":           {corev1.RestartPolicyNever, "exit 1", corev1.PodFailed},
		"a success under OnFailure completes the pod":   {corev1.RestartPolicyOnFailure, "exit 0", corev1.PodSucceeded},
		"a failing init container under Never fails it": {corev1.RestartPolicyNever, "", corev1.PodFailed},
	} {
		t.Run(name, func(t *testing.T) {
			spec := corev1.PodSpec{RestartPolicy: tc.policy, Containers: []corev1.Container{sh("main", tc.script)}}
			if tc.script == "" {
				spec.InitContainers = []corev1.Container{sh("init", "exit 2")}
				spec.Containers = []corev1.Container{sh("main", "echo must-not-run")}
			}
			p := run(t, newWorld(), testPod("policy", spec))
			eventually(t, string(tc.phase), func() bool { return p.Status().Phase == tc.phase })
			if tc.script == "" && containerStatus(p.Status(), "main").State.Waiting == nil {
				t.Error("the container ran although its init container failed")
			}
		})
	}
}

func TestReadinessFollowsAnExecProbe(t *testing.T) {
	c := sh("web", "sleep 60")
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-e", "/tmp/ready-" + t.Name()}}},
		PeriodSeconds: 1, FailureThreshold: 1}
	p := run(t, newWorld(), testPod("ready", corev1.PodSpec{Containers: []corev1.Container{c}}))
	ready := func() bool {
		for _, cond := range p.Status().Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	eventually(t, "a failed probe logged", func() bool { return strings.Contains(p.events(), "readiness probe failed") })
	if ready() {
		t.Fatal("ready before the probe passed")
	}
	marker := "/tmp/ready-" + t.Name()
	if err := writeFile(marker); err != nil {
		t.Fatal(err)
	}
	defer removeFile(marker)
	eventually(t, "ready", ready)
	removeFile(marker)
	eventually(t, "not ready again", func() bool { return !ready() })
}

// A probe that fails is an Unhealthy Event in the kubelet's words, on the container's field
// path: the exec probe's output kept as it printed it (the shadow's reason line, newline
// and all), a timed-out command named, a probe that cannot run at all said to have errored.
func TestFailedProbesAreUnhealthyEventsAsTheKubeletRecordsThem(t *testing.T) {
	failing := sh("tunnel", "sleep 60")
	failing.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c",
		`echo "TunnelDown: ssh exited: Connection closed by 127.0.0.2 port 22"; exit 1`}}}, PeriodSeconds: 1}
	slow := sh("slow", "sleep 60")
	slow.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}},
		PeriodSeconds: 1, TimeoutSeconds: 1}
	noPort := sh("noport", "sleep 60")
	noPort.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("nope")}},
		PeriodSeconds: 1, FailureThreshold: 1}
	always := corev1.ContainerRestartPolicyAlways
	sidecar := sh("relay", "sleep 60")
	sidecar.RestartPolicy = &always
	sidecar.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "echo not yet >&2; exit 2"}}},
		PeriodSeconds: 1, FailureThreshold: 100}
	warning := func(container, message string) Event {
		return Event{FieldPath: container, Type: corev1.EventTypeWarning, Reason: "Unhealthy", Message: message}
	}
	// A sidecar that never starts holds the containers back, so they are in a pod of their own.
	p := run(t, newWorld(), testPod("probes", corev1.PodSpec{InitContainers: []corev1.Container{sidecar}, Containers: []corev1.Container{sh("main", "sleep 60")}}))
	q := run(t, newWorld(), testPod("probes2", corev1.PodSpec{Containers: []corev1.Container{failing, slow, noPort}}))
	p.eventuallyRecords(t, warning("spec.initContainers{relay}", "Startup probe failed: not yet\n"))
	q.eventuallyRecords(t, warning("spec.containers{tunnel}", "Readiness probe failed: TunnelDown: ssh exited: Connection closed by 127.0.0.2 port 22\n"))
	q.eventuallyRecords(t, warning("spec.containers{slow}", `Readiness probe failed: command "sleep 5" timed out`))
	q.eventuallyRecords(t, warning("spec.containers{noport}", `Liveness probe errored and resulted in unknown state: container has no port named "nope"`))
	// An errored probe counts neither way: the liveness probe at threshold 1 killed nothing.
	if n := containerStatus(q.Status(), "noport").RestartCount; n != 0 {
		t.Errorf("the container whose liveness probe errored restarted %d times", n)
	}
}

// A volume whose Secret is missing is a FailedMount Event on the pod until the Secret exists.
func TestAMissingVolumeSecretIsAFailedMountEvent(t *testing.T) {
	w := newWorld()
	c := sh("main", "cat /etc/key/id")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "key", MountPath: "/etc/key"}}
	p := run(t, w, testPod("mount", corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c},
		Volumes: []corev1.Volume{{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "site-ssh-key"}}}}}))
	p.eventuallyRecords(t, Event{Type: corev1.EventTypeWarning, Reason: "FailedMount",
		Message: `MountVolume.SetUp failed for volume "key" : secret "site-ssh-key" not found`})
	w.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "site-ssh-key", Namespace: "ns"}, Data: map[string][]byte{"id": []byte("k")}})
	eventually(t, "pod succeeded", func() bool { return p.Status().Phase == corev1.PodSucceeded })
}

func TestALivenessTCPProbeRestartsAContainerThatStopsListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := sh("server", "socat TCP-LISTEN:"+itoa(port)+",bind=127.0.0.1,reuseaddr,fork SYSTEM:'echo hi' & pid=$!; sleep 2; kill $pid; sleep 60")
	c.Ports = []corev1.ContainerPort{{Name: "svc", ContainerPort: int32(port)}}
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("svc")}},
		InitialDelaySeconds: 1, PeriodSeconds: 1, FailureThreshold: 2}
	p := run(t, newWorld(), testPod("live", corev1.PodSpec{Containers: []corev1.Container{c}}))
	eventually(t, "a restart after the liveness probe failed", func() bool { return containerStatus(p.Status(), "server").RestartCount >= 1 })
	if !strings.Contains(p.events(), "liveness probe failed 2 times") {
		t.Errorf("node log lacks the liveness kill:\n%s", p.events())
	}
}

func TestTerminationMessageComesFromTheFileOrTheLogs(t *testing.T) {
	for name, tc := range map[string]struct {
		script string
		policy corev1.TerminationMessagePolicy
		want   string
	}{
		"the message file wins":                           {"echo done-well > /dev/termination-log; exit 1", corev1.TerminationMessageFallbackToLogsOnError, "done-well\n"},
		"the log tail stands in on error with fallback":   {"echo first; echo last; exit 1", corev1.TerminationMessageFallbackToLogsOnError, "first\nlast\n"},
		"the log is not used without the fallback policy": {"echo noise; exit 1", corev1.TerminationMessageReadFile, ""},
	} {
		t.Run(name, func(t *testing.T) {
			uid := int64(65534)
			c := sh("main", tc.script)
			c.TerminationMessagePolicy = tc.policy
			c.SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
			p := run(t, newWorld(), testPod("msg", corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c}}))
			eventually(t, "failed", func() bool { return p.Status().Phase == corev1.PodFailed })
			term := containerStatus(p.Status(), "main").State.Terminated
			if term == nil || term.Message != tc.want || term.ExitCode != 1 {
				t.Errorf("terminated %+v, want message %q and exit code 1", term, tc.want)
			}
		})
	}
}

func TestLogsHonourTailTimestampsAndLimit(t *testing.T) {
	p := run(t, newWorld(), testPod("logs", corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{sh("main", "echo one; echo two >&2; echo three")}}))
	eventually(t, "succeeded", func() bool { return p.Status().Phase == corev1.PodSucceeded })
	for name, tc := range map[string]struct {
		opts  api.ContainerLogOpts
		check func(string) bool
	}{
		"everything in order": {api.ContainerLogOpts{}, func(s string) bool {
			return s == "one\ntwo\nthree\n" || s == "one\nthree\ntwo\n" || s == "two\none\nthree\n"
		}},
		"the last line with tail": {api.ContainerLogOpts{Tail: 1}, func(s string) bool { return strings.Count(s, "\n") == 1 }},
		"timestamps first": {api.ContainerLogOpts{Timestamps: true, Tail: 1}, func(s string) bool {
			ts, _, ok := strings.Cut(s, " ")
			_, err := time.Parse(time.RFC3339Nano, ts)
			return ok && err == nil
		}},
		"limited bytes": {api.ContainerLogOpts{LimitBytes: 5}, func(s string) bool { return len(s) == 5 }},
	} {
		t.Run(name, func(t *testing.T) {
			if got := logsOf(t, p, "main", tc.opts); !tc.check(got) {
				t.Errorf("logs %q", got)
			}
		})
	}
}

func TestASidecarRunsBesideTheNextInitContainerAndTheContainers(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	side := sh("sidecar", "touch /side-test/up; sleep 60")
	side.RestartPolicy = &always
	side.VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/side-test"}}
	next := sh("next", "test -e /side-test/up")
	next.VolumeMounts = side.VolumeMounts
	main := sh("main", "sleep 60")
	p := run(t, newWorld(), testPod("sidecar", corev1.PodSpec{
		InitContainers: []corev1.Container{side, next},
		Containers:     []corev1.Container{main},
		Volumes:        []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}))
	eventually(t, "pod running and ready", func() bool {
		st := p.Status()
		return st.Phase == corev1.PodRunning && containerStatus(st, "main").Ready
	})
	st := p.Status()
	if containerStatus(st, "sidecar").State.Running == nil {
		t.Error("sidecar not running beside the containers")
	}
	if term := containerStatus(st, "next").State.Terminated; term == nil || term.ExitCode != 0 {
		t.Errorf("init container after the sidecar: %+v", containerStatus(st, "next").State)
	}
}

func TestAContainerWithoutCommandSaysTheSiteRunsNoImages(t *testing.T) {
	c := corev1.Container{Name: "img", Image: "example.org/app:1"}
	p := run(t, newWorld(), testPod("noimage", corev1.PodSpec{Containers: []corev1.Container{c}}))
	eventually(t, "the no-entrypoint reason", func() bool {
		w := containerStatus(p.Status(), "img").State.Waiting
		return w != nil && w.Reason == "CreateContainerError" && strings.Contains(w.Message, "runs no image entrypoints")
	})
	if id := containerStatus(p.Status(), "img").ImageID; id != "site://example.org/app:1" {
		t.Errorf("imageID %q", id)
	}
}

func TestStopTerminatesTheWholeProcessGroup(t *testing.T) {
	grace := int64(1)
	// 3017 marks this test's processes among the machine's.
	// The subshell says when both have set their traps: the shell's is set before it forks.
	c := sh("main", "trap '' TERM; (trap '' TERM; echo trapped; sleep 3017) & sleep 3017")
	pod := testPod("stop", corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{c}})
	p := run(t, newWorld(), pod)
	// Not a fixed pause: on a loaded machine the shell may not have reached its trap yet.
	eventually(t, "both traps set", func() bool { return strings.Contains(logText(p, "main", api.ContainerLogOpts{}), "trapped") })
	start := time.Now()
	p.Stop(time.Second)
	if d := time.Since(start); d < 900*time.Millisecond || d > 5*time.Second {
		t.Errorf("stop took %s, want about the 1s grace before SIGKILL", d)
	}
	if term := containerStatus(p.Status(), "main").State.Terminated; term == nil || term.ExitCode != 137 {
		t.Errorf("state after stop %+v, want terminated by SIGKILL (137)", containerStatus(p.Status(), "main").State)
	}
	// SIGKILL is sent to the group at once; the kernel reaps the killed a moment later.
	var left string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, _ := execOutput("pgrep", "-f", "sleep 3017")
		if left = strings.TrimSpace(out); left == "" {
			return
		}
	}
	t.Errorf("processes of the group survive: %s", left)
}

// A probe runs in the container's mounts, never before the helper has made them: a probe
// started at once, as the shadow's are, finds the volume's files on its first run.
func TestAProbeSeesTheContainersVolumesFromItsFirstRun(t *testing.T) {
	const dir = "/probe-volume-test"
	init := sh("writer", "echo here > "+dir+"/marker")
	init.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: dir}}
	var containers []corev1.Container
	for i := range 5 {
		c := sh(fmt.Sprintf("probed-%d", i), "sleep 60")
		c.VolumeMounts = init.VolumeMounts
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", dir + "/marker"}}},
			PeriodSeconds: 1, FailureThreshold: 1}
		containers = append(containers, c)
	}
	p := run(t, newWorld(), testPod("probe-mounts", corev1.PodSpec{
		InitContainers: []corev1.Container{init},
		Containers:     containers,
		Volumes:        []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}))
	eventually(t, "every container ready", func() bool {
		for _, cond := range p.Status().Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	})
	if strings.Contains(p.events(), "readiness probe failed") {
		t.Errorf("a probe ran before the container's volume was mounted:\n%s", p.events())
	}
}
