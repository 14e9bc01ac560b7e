package inject

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// contractReasons are the reasons the shadow's scripts and its readiness probe may write:
// internal/tunnelstate's catalogue, which holds the remedy for each.
var contractReasons = func() []string {
	out := make([]string, len(tunnelstate.ScriptReasons))
	for i, r := range tunnelstate.ScriptReasons {
		out[i] = string(r)
	}
	return out
}()

// reasonUses are the ways a script names a reason: the first argument of report, fail,
// terminate and slurm_say as a command; an assignment to cl_reason, sn_reason or status; a
// case pattern on a reason line ("LoginRefused:*"); a line the probe prints.
var reasonUses = []*regexp.Regexp{
	regexp.MustCompile(`(?:^\s*|[;&|{]\s*|\)\s+|then\s+|else\s+)(?:report|fail|terminate|slurm_say) "?([A-Z][A-Za-z]+)\b`),
	regexp.MustCompile(`\b(?:cl_reason|sn_reason|status)=([A-Z][A-Za-z]+)\b`),
	regexp.MustCompile(`\b([A-Z][A-Za-z]+):\*`),
	regexp.MustCompile(`echo "([A-Z][A-Za-z]+): `),
}

// TestScriptsEmitOnlyContractReasons holds every script to the contract's tokens: a reason
// any script names is one of contractReasons, and each of those appears somewhere, so the
// list and the scripts cannot drift apart.
func TestScriptsEmitOnlyContractReasons(t *testing.T) {
	entries, err := scriptFiles.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		for _, line := range strings.Split(string(mustRead(e.Name())), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, re := range reasonUses {
				for _, m := range re.FindAllStringSubmatch(line, -1) {
					seen[m[1]] = true
					if !slices.Contains(contractReasons, m[1]) {
						t.Errorf("scripts/%s names reason %s, which the contract does not have: %s", e.Name(), m[1], strings.TrimSpace(line))
					}
				}
			}
		}
	}
	for _, r := range contractReasons {
		if !seen[r] {
			t.Errorf("no script names the contract's reason %s", r)
		}
	}
}

// runProbe runs the readiness probe as the kubelet does, on a status file holding status
// (none when status is nil).
func runProbe(t *testing.T, status *string) (int, string) {
	t.Helper()
	pr := statusProbe(containerForward).Exec.Command
	pr = rewriteMounts(t, corev1.Container{VolumeMounts: []corev1.VolumeMount{scriptsMount()}},
		map[string]string{scriptsDir: scriptsVolumeDir(t, ScriptsConfigMap("test"))}, pr)
	file := filepath.Join(t.TempDir(), containerForward)
	if status != nil {
		if err := os.WriteFile(file, []byte(*status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(pr[0], append(pr[1:len(pr)-1], file)...)
	out, err := cmd.Output()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running the probe: %v", err)
		}
		code = ee.ExitCode()
	}
	return code, string(out)
}

func TestTunnelProbe(t *testing.T) {
	// The line is written when the case runs, so its age is the one the case names.
	line := func(age int64, reason string) func() *string {
		return func() *string {
			s := strconv.FormatInt(time.Now().Unix()-age, 10) + " " + reason + "\n"
			return &s
		}
	}
	none := func() *string { return nil }
	empty := func() *string { return new(string) }
	type want struct {
		code int
		out  string
	}
	cases := map[string]struct {
		status func() *string
		want   want
	}{
		"a fresh Ready line is ready":                   {line(2, "Ready: forwarding ports 8888 to 198.18.0.7 through 127.0.0.2"), want{0, ""}},
		"a Ready line 60 s old is still ready":          {line(59, "Ready: forwarding ports 8888 to 198.18.0.7 through 127.0.0.2"), want{0, ""}},
		"a Ready line over 60 s old is TunnelDown":      {line(75, "Ready: forwarding ports 8888"), want{1, "TunnelDown: no status for 75 s: the ssh-forward script has stopped updating it\n"}},
		"no status file yet is Connecting":              {none, want{1, "Connecting: the ssh-forward script has written no status yet\n"}},
		"an empty status file is Connecting":            {empty, want{1, "Connecting: the ssh-forward script has written no status yet\n"}},
		"a fresh failure prints its reason line":        {line(1, "NodeConnectionRefused: 198.18.0.7 refused the connection to port 8888 from 127.0.0.2"), want{1, "NodeConnectionRefused: 198.18.0.7 refused the connection to port 8888 from 127.0.0.2\n"}},
		"a stale failure is TunnelDown, not the reason": {line(300, "LoginRefused: alice@login:22 refused the login"), want{1, "TunnelDown: no status for 300 s: the ssh-forward script has stopped updating it\n"}},
		"Connecting is not ready":                       {line(0, "Connecting: logging in"), want{1, "Connecting: logging in\n"}},
		"a token starting with Ready is not Ready":      {line(0, "ReadyNot: x"), want{1, "ReadyNot: x\n"}},
	}
	for _, r := range contractReasons {
		if r != "Ready" {
			cases["reason "+r+" is not ready and printed as it is"] = struct {
				status func() *string
				want   want
			}{line(3, r+": some message"), want{1, r + ": some message\n"}}
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out := runProbe(t, tc.status())
			// A loaded machine runs the probe a few seconds after the line was written: an age
			// a little over the case's is the same answer.
			if got, want := staleAge.FindStringSubmatch(out), staleAge.FindStringSubmatch(tc.want.out); got != nil && want != nil {
				g, _ := strconv.Atoi(got[1])
				w, _ := strconv.Atoi(want[1])
				if g >= w && g <= w+30 {
					out = strings.Replace(out, got[0], want[0], 1)
				}
			}
			if code != tc.want.code || out != tc.want.out {
				t.Errorf("probe: exit %d, output %q; want exit %d, output %q", code, out, tc.want.code, tc.want.out)
			}
		})
	}
}

// TestWaitReasonProbe runs wait-reason's probe as the kubelet does, over what wait-for-node
// logs in turn: it prints (and fails on) each new WaitingForNode line once, and passes on the
// rest, so the kubelet records an Event per change, none per period.
func TestWaitReasonProbe(t *testing.T) {
	state := t.TempDir()
	scripts := scriptsVolumeDir(t, ScriptsConfigMap("test"))
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := rewriteMounts(t, corev1.Container{VolumeMounts: []corev1.VolumeMount{scriptsMount()}},
			map[string]string{scriptsDir: scripts}, runScript(scriptWaitReason, containerWaitReason, args...))
		c := exec.Command(cmd[0], cmd[1:]...)
		c.Env = append(os.Environ(), envStateDir+"="+state)
		out, err := c.Output()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, string(out)
		case errors.As(err, &ee):
			return ee.ExitCode(), string(out)
		}
		t.Fatalf("running wait-reason %q: %v", args, err)
		return 0, ""
	}
	logged := filepath.Join(state, "node-discovery."+containerWaitForNode+".logged")
	const (
		queued = "WaitingForNode: job 12 is PENDING in Slurm (reason BeginTime, expected start 2026-12-06T07:00:00Z): waiting for it to run"
		moved  = "WaitingForNode: job 12 is PENDING in Slurm (reason Priority, expected start 2026-12-06T09:00:00Z): waiting for it to run"
	)
	steps := []struct {
		name, logged string
		code         int
		out          string
	}{
		{"nothing logged yet passes", "", 0, ""},
		{"a first WaitingForNode line is printed and fails", queued, 1, queued + "\n"},
		{"the same line again passes", queued, 0, ""},
		{"a new reason is printed and fails", moved, 1, moved + "\n"},
		{"a line of another reason passes", "NodeFound: job 12 runs on node c1 at 198.18.0.7", 0, ""},
		{"the old line back is a change again", queued, 1, queued + "\n"},
	}
	for _, st := range steps {
		if st.logged != "" {
			if err := os.WriteFile(logged, []byte(st.logged+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if code, out := run("probe"); code != st.code || out != st.out {
			t.Errorf("%s: exit %d, output %q; want exit %d, output %q", st.name, code, out, st.code, st.out)
		}
	}
	// A restarted sidecar is a new container whose probe failures the reporter has not seen:
	// its process forgets what was printed, so the line in force is printed again, and it ends
	// on TERM at once.
	cmd := rewriteMounts(t, corev1.Container{VolumeMounts: []corev1.VolumeMount{scriptsMount()}},
		map[string]string{scriptsDir: scripts}, runScript(scriptWaitReason, containerWaitReason))
	idle := exec.Command(cmd[0], cmd[1:]...)
	idle.Env = append(os.Environ(), envStateDir+"="+state)
	if err := idle.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- idle.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(state, statusDir, containerWaitReason+".printed")); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sidecar's process kept what its probe printed before the restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, out := run("probe"); code != 1 || out != queued+"\n" {
		t.Errorf("after a restart: exit %d, output %q; want the line in force printed again", code, out)
	}
	if err := idle.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the sidecar's process on TERM: %v, want exit 0", err)
		}
	case <-time.After(time.Minute):
		_ = idle.Process.Kill()
		t.Error("the sidecar's process did not end on TERM within a minute")
	}
}

// staleAge is the age a probe reports of a status line it finds too old.
var staleAge = regexp.MustCompile(`no status for ([0-9]+) s`)

// TestProbesAndTerminationLog: the long-running containers have the status probe on their
// own status file, and every script container names its termination message file.
func TestProbesAndTerminationLog(t *testing.T) {
	for _, c := range shadowCases(t) {
		s, _ := c.shadowOf(t)
		spec := s.Deployment.Spec.Template.Spec
		for _, ctr := range append(spec.InitContainers, spec.Containers...) {
			if got := envValue(ctr, envTerminationLog); got != ctr.TerminationMessagePath || got == "" {
				t.Errorf("%s: %s is %q, its TerminationMessagePath %q", ctr.Name, envTerminationLog, got, ctr.TerminationMessagePath)
			}
			probed := slices.Contains([]string{containerForward, ContainerReverse, containerKrbRefresh, containerWaitReason}, ctr.Name)
			if probed != (ctr.ReadinessProbe != nil) {
				t.Errorf("%s: readiness probe %v, want one: %v", ctr.Name, ctr.ReadinessProbe != nil, probed)
			}
			if ctr.LivenessProbe != nil {
				t.Errorf("%s has a liveness probe: a restart mends none of the failures the scripts report", ctr.Name)
			}
			if ctr.Name == containerWaitReason {
				if !slices.Equal(ctr.ReadinessProbe.Exec.Command, runScript(scriptWaitReason, containerWaitReason, "probe")) {
					t.Errorf("%s: probe runs %q, want wait-reason.sh probe", ctr.Name, ctr.ReadinessProbe.Exec.Command)
				}
				continue
			}
			if p := ctr.ReadinessProbe; p != nil {
				if want := filepath.Join(stateDir, statusDir, ctr.Name); p.Exec.Command[len(p.Exec.Command)-1] != want {
					t.Errorf("%s: probe reads %s, want %s", ctr.Name, p.Exec.Command[len(p.Exec.Command)-1], want)
				}
				if p.PeriodSeconds != 10 || p.TimeoutSeconds != 3 || p.FailureThreshold != 1 || p.SuccessThreshold != 1 {
					t.Errorf("%s: probe period %d timeout %d thresholds %d/%d", ctr.Name, p.PeriodSeconds, p.TimeoutSeconds, p.FailureThreshold, p.SuccessThreshold)
				}
			}
		}
	}
}

// readReason returns the reason line in a status file (without its epoch) or a termination
// message file, or "" while there is none.
func readReason(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	line := strings.TrimSuffix(string(data), "\n")
	if at, rest, ok := strings.Cut(line, " "); ok && regexp.MustCompile(`^[0-9]+$`).MatchString(at) {
		return rest
	}
	return line
}

// failure is one runtime failure made for real, with the reason line it must produce.
type failure struct {
	opt siteOptions
	// set up the failure on the site before ssh-forward starts; return the node to publish
	setup func(t *testing.T, s *site) string
	// reason and the values its message must name (%login: user@host:port, %node, %port)
	reason string
	names  []string
	// exits: the reason is the termination message (ssh-forward exits); else the status file
	exits bool
	// fix mends it; ssh-forward (started again when it exited) then reports Ready
	fix func(t *testing.T, s *site)
}

func TestTunnelFailuresAreNamed(t *testing.T) {
	onNode := func(_ *testing.T, s *site) string { return s.nodes["node07"] }
	quiet := func(t *testing.T, s *site) string {
		addr := sshtest.NodeAddress(t) // nothing listens there
		s.nodes["quiet"] = addr
		return addr
	}
	serveQuiet := func(t *testing.T, s *site) { sshtest.StartHTTP(t, s.nodes["quiet"], s.port, "quiet") }
	useNode07 := func(t *testing.T, s *site) { s.publish(t, "node07") }
	otherKey := func(t *testing.T, s *site) string {
		key := filepath.Join(t.TempDir(), "other")
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		return key
	}
	knownHosts := func(s *site) string { return filepath.Join(s.mounts[knownHostsDir], knownHostsKey) }
	rightKnownHosts := func(t *testing.T, s *site) { copyFile(t, s.login.KnownHosts, knownHosts(s), 0o644) }
	pinBastion := func(t *testing.T, s *site) {
		appendFile(t, knownHosts(s), "\n"+sshtest.ReadFile(t, s.bastion.KnownHosts))
	}
	bastionKeys := func(s *site) string { return filepath.Join(filepath.Dir(s.bastion.ClientKey), "authorized_keys") }
	cases := map[string]failure{
		"portforward mode with everything in place is Ready": {opt: siteOptions{mode: policy.ForwardModePortForward, pinned: true},
			setup: onNode, reason: "Ready", names: []string{"%port", "%node"}},
		"exec mode with everything in place is Ready": {opt: siteOptions{mode: policy.ForwardModeExec, pinned: true},
			setup: onNode, reason: "Ready", names: []string{"%port", "%node", "'nc'"}},
		"a key the login sshd does not accept is LoginRefused": {opt: siteOptions{mode: policy.ForwardModePortForward, pinned: true},
			setup: func(t *testing.T, s *site) string {
				copyFile(t, otherKey(t, s), filepath.Join(s.mounts[keyDir], keyFile), 0o400)
				return s.nodes["node07"]
			},
			reason: "LoginRefused", names: []string{"%login", "Secret login-key", "publickey"}, exits: true,
			fix: func(t *testing.T, s *site) {
				key := filepath.Join(s.mounts[keyDir], keyFile)
				_ = os.Chmod(key, 0o600)
				copyFile(t, s.login.ClientKey, key, 0o400)
			}},
		"a known_hosts with another key for the login host is HostKeyMismatch": {opt: siteOptions{mode: policy.ForwardModePortForward, pinned: true},
			setup: func(t *testing.T, s *site) string {
				pub := sshtest.ReadFile(t, otherKey(t, s)+".pub")
				writeAtomically(t, knownHosts(s), fmt.Sprintf("[%s]:%d %s", s.login.Host, s.login.Port, pub))
				return s.nodes["node07"]
			},
			reason: "HostKeyMismatch", names: []string{"%host", "login-known-hosts"}, exits: true, fix: rightKnownHosts},
		"a known_hosts with no key for the login host is HostKeyUnknown": {opt: siteOptions{mode: policy.ForwardModeExec, pinned: true},
			setup: func(t *testing.T, s *site) string {
				writeAtomically(t, knownHosts(s), "")
				return s.nodes["node07"]
			},
			reason: "HostKeyUnknown", names: []string{"%host", "login-known-hosts"}, exits: true, fix: rightKnownHosts},
		"a bastion whose host key the known_hosts lacks is HostKeyUnknown naming the bastion": {
			opt:   siteOptions{mode: policy.ForwardModePortForward, pinned: true, bastion: true, bastionUnpinned: true},
			setup: onNode, reason: "HostKeyUnknown", names: []string{"no key for the bastion %bastion", "login-known-hosts"}, exits: true, fix: pinBastion},
		"a bastion that does not accept the key is LoginRefused naming the bastion": {
			opt: siteOptions{mode: policy.ForwardModeExec, pinned: true, bastion: true},
			setup: func(t *testing.T, s *site) string {
				writeAtomically(t, bastionKeys(s), sshtest.ReadFile(t, s.bastion.ClientKey+".pub"))
				return s.nodes["node07"]
			},
			reason: "LoginRefused", names: []string{"the bastion %user@%bastion:", "Secret login-key"}, exits: true,
			fix: func(t *testing.T, s *site) {
				appendFile(t, bastionKeys(s), "\n"+sshtest.ReadFile(t, s.login.ClientKey+".pub"))
			}},
		// The login sshd is up and reachable directly: LoginUnreachable shows the shadow does
		// not go around a bastion that is down.
		"a bastion nothing listens on is LoginUnreachable though the login node is up": {
			opt:   siteOptions{mode: policy.ForwardModePortForward, pinned: true, bastion: true, bastionPort: 1},
			setup: onNode, reason: "LoginUnreachable", names: []string{"%login through the bastion %user@%bastion:1", "Connection refused"}, exits: true},
		"a login port nothing listens on is LoginUnreachable": {opt: siteOptions{mode: policy.ForwardModePortForward, pinned: true, loginPort: 1},
			setup: onNode, reason: "LoginUnreachable", names: []string{"Connection refused", ":1"}, exits: true},
		"a login sshd with AllowTcpForwarding no is ForwardingProhibited in portforward mode": {
			opt:   siteOptions{mode: policy.ForwardModePortForward, pinned: true, sshdConfig: []string{"AllowTcpForwarding no"}},
			setup: onNode, reason: "ForwardingProhibited", names: []string{"%node:%port", "administratively prohibited"}},
		"a node port nothing listens on is NodeConnectionRefused in portforward mode": {opt: siteOptions{mode: policy.ForwardModePortForward, pinned: true},
			setup: quiet, reason: "NodeConnectionRefused", names: []string{"%node", "port %port", "Connection refused"}, fix: serveQuiet},
		"a node port nothing listens on is NodeConnectionRefused in exec mode": {opt: siteOptions{mode: policy.ForwardModeExec, pinned: true},
			setup: quiet, reason: "NodeConnectionRefused", names: []string{"%node", "port %port", "Connection refused"}, fix: serveQuiet},
		"a node address with no route is NodeUnreachable in portforward mode": {opt: siteOptions{mode: policy.ForwardModePortForward, pinned: true},
			setup: func(*testing.T, *site) string { return "10.254.0.1" }, reason: "NodeUnreachable", names: []string{"10.254.0.1:%port", "open failed"}, fix: useNode07},
		"a node address with no route is NodeUnreachable in exec mode": {opt: siteOptions{mode: policy.ForwardModeExec, pinned: true},
			setup: func(*testing.T, *site) string { return "10.254.0.1" }, reason: "NodeUnreachable", names: []string{"10.254.0.1:%port", "Network is unreachable"}, fix: useNode07},
		"an ExecConnectCommand the login node lacks is ExecCommandMissing": {opt: siteOptions{mode: policy.ForwardModeExec, pinned: true, connect: "/nonexistent/nc"},
			setup: onNode, reason: "ExecCommandMissing", names: []string{"'/nonexistent/nc'", "%host"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, tc.opt)
			node := tc.setup(t, s)
			writeAtomically(t, s.nodeFile, node)
			status := filepath.Join(s.mounts[stateDir], statusDir, containerForward)
			termination := filepath.Join(t.TempDir(), "termination-log")
			start := func() *process {
				return runContainer(t, container(t, s.shadow.Deployment, containerForward), s.mounts,
					"SHADOW_LISTEN_ADDRESS="+s.listen, pollEnv, "SHADOW_CHECK_INTERVAL=0.5", envTerminationLog+"="+termination)
			}
			p := start()
			file := status
			if tc.exits {
				file = termination
				p.expectFailure(t, 30*time.Second, "the tunnel cannot work; want non-zero")
			}
			port := strconv.Itoa(s.port)
			loginPort := s.login.Port
			if tc.opt.loginPort != 0 {
				loginPort = tc.opt.loginPort
			}
			bastion := ""
			if s.bastion != nil {
				bastion = s.bastion.Host
			}
			r := strings.NewReplacer("%login", fmt.Sprintf("%s@%s:%d", s.login.User, s.login.Host, loginPort),
				"%host", s.login.Host, "%node", node, "%port", port, "%bastion", bastion, "%user", s.login.User)
			expectReason(t, file, tc.reason, r, tc.names)
			if tc.fix == nil {
				return
			}
			tc.fix(t, s)
			if tc.exits {
				p = start()
			}
			expectReason(t, status, "Ready", r, []string{"%port"})
			if !p.running() {
				t.Errorf("ssh-forward exited once the failure was mended:\n%s", p.out)
			}
		})
	}
}

// TestClassifyTellsAnUnusableKeyFromARefusedLogin feeds classify what ssh prints when it
// cannot use its identity file (sshconnect2.c: Load key "%s": %s), before the login the server
// then refuses: the first line is the cause, KeyUnreadable, where the refusal alone is
// LoginRefused. The harness runs as root, whom no file mode keeps out, so a real ssh cannot
// be made to print it here.
func TestClassifyTellsAnUnusableKeyFromARefusedLogin(t *testing.T) {
	sshtest.Require(t, "bash")
	refused := "alice@login.example.org: Permission denied (publickey).\n"
	for input, want := range map[string]string{
		`Load key "/etc/interlink-shadow/ssh/id": Permission denied` + "\n" + refused:                                                                       "KeyUnreadable",
		"Permissions 0644 for '/etc/interlink-shadow/ssh/id' are too open.\n" + `Load key "/etc/interlink-shadow/ssh/id": bad permissions` + "\n" + refused: "KeyUnreadable",
		refused: "LoginRefused",
		// reverse-hop's reason line when srun has no job to step into.
		"JobCompleted: job 5d2e7a31-8c4b-4f0e-9b6a-2c1d3e4f5a6b COMPLETED in Slurm: the pod's batch job has ended, and its tunnel with it\n":           "JobCompleted",
		"NoRunningJob: no running job named 5d2e7a31-8c4b-4f0e-9b6a-2c1d3e4f5a6b in Slurm: it ended (CANCELLED), unless the plugin submits it again\n": "NoRunningJob",
	} {
		file := filepath.Join(t.TempDir(), "err")
		if err := os.WriteFile(file, []byte(input), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", commonFunctions+"\nclassify \"$1\"; printf '%s|%s' \"$cl_reason\" \"$(failure_message)\"", "ssh-forward", file)
		cmd.Env = append(os.Environ(), "SHADOW_LOGIN_HOST=login.example.org", "SHADOW_KEY_SECRET=login-key",
			"SHADOW_SSH_OPTIONS=User=alice\nPort=22\nIdentityFile=/etc/interlink-shadow/ssh/id")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("classify: %v", err)
		}
		reason, msg, _ := strings.Cut(string(out), "|")
		if reason != want {
			t.Errorf("classify over %q: %s (%s), want %s", input, reason, msg, want)
		}
		if want == "KeyUnreadable" && (!strings.Contains(msg, "cannot use the key /etc/interlink-shadow/ssh/id of Secret login-key") || !strings.Contains(msg, "Load key")) {
			t.Errorf("the KeyUnreadable message %q does not name the key, its Secret and what ssh said", msg)
		}
	}
}

// expectReason waits until file holds a reason line with reason whose message names each of
// names (replaced by r).
func expectReason(t *testing.T, file, reason string, r *strings.Replacer, names []string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		got := readReason(file)
		if !strings.HasPrefix(got, reason+": ") {
			return fmt.Errorf("%s holds %q, want reason %s", filepath.Base(file), got, reason)
		}
		for _, n := range names {
			if n = r.Replace(n); !strings.Contains(got, n) {
				return fmt.Errorf("%s holds %q, which does not name %q", filepath.Base(file), got, n)
			}
		}
		if len(got) > 512 {
			return fmt.Errorf("the reason line is %d bytes, over 512", len(got))
		}
		return nil
	})
}

func TestWaitForNodeTerminationMessage(t *testing.T) {
	t.Run("success is NodeFound with the node", func(t *testing.T) {
		t.Parallel()
		s := newSite(t, siteOptions{mode: policy.ForwardModePortForward})
		term := filepath.Join(t.TempDir(), "termination-log")
		s.publish(t, "node07")
		p := runContainer(t, container(t, s.shadow.Deployment, containerWaitForNode), s.mounts, pollEnv, envTerminationLog+"="+term)
		if code := p.wait(t, 15*time.Second); code != 0 {
			t.Fatalf("exit code %d with a node published", code)
		}
		if got, want := sshtest.ReadFile(t, term), "NodeFound: "+s.nodes["node07"]+"\n"; got != want {
			t.Errorf("termination message %q, want %q", got, want)
		}
	})
	t.Run("a timeout is NodeWaitTimedOut naming the ConfigMap", func(t *testing.T) {
		t.Parallel()
		s := newSite(t, siteOptions{mode: policy.ForwardModePortForward, nodeTimeout: "1s"})
		term := filepath.Join(t.TempDir(), "termination-log")
		p := runContainer(t, container(t, s.shadow.Deployment, containerWaitForNode), s.mounts, pollEnv, envTerminationLog+"="+term)
		p.expectFailure(t, 15*time.Second, "no node was published", "Likely causes")
		cm := s.shadow.NodeConfigMap.Namespace + "/" + s.shadow.NodeConfigMap.Name
		expectReason(t, term, "NodeWaitTimedOut", strings.NewReplacer(), []string{"after 1s", "ConfigMap " + cm})
	})
}

// kerberosShadow renders a Kerberos shadow and the mounts its kinit and krb-refresh need, with
// a keytab holding keytab and a krb5.conf whose KDC nothing listens on.
func kerberosShadow(t *testing.T, keytab string) (*Shadow, map[string]string, []string) {
	t.Helper()
	sshtest.Require(t, "kinit")
	login := sshtest.StartSSHD(t)
	doc := fmt.Sprintf("virtualNodes:\n  hpc-vk:\n    Network:\n      EnableTunnel: true\n      ShadowMode: ssh\n      SSH:\n"+
		"        LoginHost: %s\n        Port: %d\n        User: alice\n        Auth: kerberos\n        KeytabSecret: hpc-keytab\n"+
		"        Principal: alice@EXAMPLE.ORG\n        NodeDiscovery: configmap\n", login.Host, login.Port)
	shadow, _ := render(t, doc, offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: 8888}))
	mounts := map[string]string{stateDir: t.TempDir(), keytabDir: t.TempDir(), nodeDir: t.TempDir(), knownHostsDir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(mounts[keytabDir], keytabFile), []byte(keytab), 0o400); err != nil {
		t.Fatal(err)
	}
	kdc := sshtest.Loopback(t) + ":" + strconv.Itoa(sshtest.FreePort(t))
	conf := filepath.Join(t.TempDir(), "krb5.conf")
	if err := os.WriteFile(conf, []byte("[libdefaults]\n default_realm = EXAMPLE.ORG\n dns_lookup_kdc = false\n"+
		"[realms]\n EXAMPLE.ORG = {\n  kdc = "+kdc+"\n }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return shadow, mounts, []string{"KRB5_CONFIG=" + conf}
}

func TestKerberosFailuresAreNamed(t *testing.T) {
	for name, keytab := range map[string]string{
		"a keytab that is no keytab is KerberosFailed":       "not a keytab\n",
		"a KDC nothing listens on is KerberosFailed as well": validKeytab(t),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			shadow, mounts, env := kerberosShadow(t, keytab)
			term := filepath.Join(t.TempDir(), "termination-log")
			kinit := runContainer(t, container(t, shadow.Deployment, containerKinit), mounts, append(env, envTerminationLog+"="+term)...)
			kinit.expectFailure(t, 60*time.Second, "kinit cannot get a ticket")
			expectReason(t, term, "KerberosFailed", strings.NewReplacer(), []string{"alice@EXAMPLE.ORG", "kinit"})

			refresh := runContainer(t, container(t, shadow.Deployment, containerKrbRefresh), mounts,
				append(env, envKrbRefreshSecs+"=1")...)
			expectReason(t, filepath.Join(mounts[stateDir], statusDir, containerKrbRefresh), "KerberosFailed",
				strings.NewReplacer(), []string{"renewing", "alice@EXAMPLE.ORG"})
			if !refresh.running() {
				t.Errorf("krb-refresh exited on a failed renewal; it retries:\n%s", refresh.out)
			}
		})
	}
}

// validKeytab is a keytab for alice@EXAMPLE.ORG made by ktutil, so only the KDC is missing.
func validKeytab(t *testing.T) string {
	t.Helper()
	sshtest.Require(t, "ktutil")
	file := filepath.Join(t.TempDir(), "alice.keytab")
	cmd := exec.Command("ktutil")
	cmd.Stdin = strings.NewReader("add_entry -password -p alice@EXAMPLE.ORG -k 1 -e aes256-cts-hmac-sha1-96\nsecret\nwkt " + file + "\nquit\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ktutil: %v\n%s", err, out)
	}
	return sshtest.ReadFile(t, file)
}
