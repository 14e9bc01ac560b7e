package inject

import (
	"fmt"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

// TestRenderedScriptsPassSyntaxChecksAndShellcheck checks every script a rendered shadow runs,
// as the container gets it: sh -n (bash -n for the bash ones) and shellcheck for that shell.
func TestRenderedScriptsPassSyntaxChecksAndShellcheck(t *testing.T) {
	sshtest.Require(t, "shellcheck", "bash", "sh")
	type rendered struct{ shell, ranBy string }
	scripts := map[string]rendered{} // by text: every case renders the same few
	for _, c := range shadowCases(t) {
		s, _ := c.shadowOf(t)
		spec := s.Deployment.Spec.Template.Spec
		for _, ctr := range append(spec.InitContainers, spec.Containers...) {
			scripts[commandScript(t, s.Scripts, ctr.Command)] = rendered{ctr.Command[0], ctr.Name}
			if relay := envValue(ctr, envExecRelay); relay != "" {
				text := mountedScript(t, s.Scripts, relay)
				scripts[text] = rendered{shebang(t, text), ctr.Name + " " + envExecRelay}
			}
			if p := ctr.ReadinessProbe; p != nil && p.Exec != nil {
				scripts[commandScript(t, s.Scripts, p.Exec.Command)] = rendered{p.Exec.Command[0], ctr.Name + " readiness probe"}
			}
		}
	}
	for text, r := range scripts {
		t.Run(r.ranBy, func(t *testing.T) {
			if want := shebang(t, text); want != r.shell {
				t.Errorf("run by %s but its #! line names %s", r.shell, want)
			}
			for _, check := range [][]string{{r.shell, "-n"}, {"shellcheck", "--shell=" + path.Base(r.shell), "-"}} {
				cmd := exec.Command(check[0], check[1:]...)
				cmd.Stdin = strings.NewReader(text)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s: %v\n%s", strings.Join(check, " "), err, out)
				}
			}
		})
	}
}

// commandScript is the text of the script a command made by runScript runs, as the scripts
// ConfigMap cm holds it.
func commandScript(t *testing.T, cm *corev1.ConfigMap, command []string) string {
	t.Helper()
	file, ok := strings.CutPrefix(command[2], ". ")
	if len(command) < 4 || command[1] != "-c" || !ok {
		t.Fatalf("command %q does not source a file of the scripts volume", command)
	}
	return mountedScript(t, cm, file)
}

// mountedScript is the text of the file at path in the scripts volume: the key of the scripts
// ConfigMap cm of its base name.
func mountedScript(t *testing.T, cm *corev1.ConfigMap, file string) string {
	t.Helper()
	text, ok := cm.Data[path.Base(file)]
	if path.Dir(file) != scriptsDir || !ok {
		t.Fatalf("%s is no file of the scripts volume (%s, ConfigMap %s)", file, scriptsDir, cm.Name)
	}
	return text
}

func shebang(t *testing.T, text string) string {
	t.Helper()
	first, _, _ := strings.Cut(text, "\n")
	shell, ok := strings.CutPrefix(first, "#!")
	if !ok {
		t.Fatalf("script without a #! line:\n%s", text)
	}
	return shell
}

// scriptMarkers is every file of scripts/ with the marker lines it holds, each exactly once;
// a file not listed here fails TestScriptMarkers, so a new script states what it splices.
var scriptMarkers = map[string][]string{
	"common.sh":          {markerCommonBegin},
	"wait-for-node.sh":   {markerCommonInsert},
	"ssh-forward.sh":     {markerCommonInsert},
	"exec-relay.sh":      nil, // sh alone: it starts per connection, so it carries nothing it does not run
	"kerberos.sh":        {markerCommonInsert},
	"ssh-reverse.sh":     {markerCommonInsert},
	"reverse-hop.sh":     {markerCommonInsert},
	"reverse-node.sh":    nil, // sent to the compute node as it is
	"tunnel-probe.sh":    nil, // the readiness probe, run as it is
	"wait-reason.sh":     nil, // a sidecar that idles and its probe: it runs none of common.sh
	"reverse-preexec.sh": {markerPreExecBegin, markerRelayInsert},
}

var allMarkers = []string{markerCommonBegin, markerCommonInsert, markerPreExecBegin, markerRelayInsert}

// markerLines counts the lines of text that are exactly marker.
func markerLines(text, marker string) int {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if line == marker {
			n++
		}
	}
	return n
}

func TestScriptMarkers(t *testing.T) {
	entries, err := scriptFiles.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		seen[name] = true
		want, ok := scriptMarkers[name]
		if !ok {
			t.Errorf("scripts/%s is not in scriptMarkers: list the marker lines it holds", name)
			continue
		}
		text := string(mustRead(name))
		for _, m := range allMarkers {
			wantN := 0
			if slices.Contains(want, m) {
				wantN = 1
			}
			if got := markerLines(text, m); got != wantN {
				t.Errorf("scripts/%s has %d lines %q, want %d", name, got, m, wantN)
			}
		}
	}
	for name := range scriptMarkers {
		if !seen[name] {
			t.Errorf("scriptMarkers lists scripts/%s, which does not exist", name)
		}
	}
}

// TestSplicedScriptsHoldEachInsertOnce checks what the containers and the job run: every
// marker line is gone, and what replaced it is there exactly once.
func TestSplicedScriptsHoldEachInsertOnce(t *testing.T) {
	if commonFunctions == "" || !strings.Contains(commonFunctions, "\nhost_rule() {\n") {
		t.Fatalf("the common functions are not those of scripts/common.sh:\n%s", commonFunctions)
	}
	if strings.Contains(commonFunctions, "begin common") {
		t.Error("the common functions hold common.sh's own header")
	}
	spliced := map[string]script{}
	for _, s := range []script{scriptWaitForNode, scriptForward, scriptKerberos, scriptReverse, scriptReverseHop} {
		spliced[s.name] = s
		if n := strings.Count(s.text, commonFunctions); n != 1 {
			t.Errorf("%s holds the common functions %d times, want once", s.name, n)
		}
		raw := string(mustRead(s.name))
		head, _, _ := strings.Cut(raw, markerCommonInsert+"\n")
		if !strings.HasPrefix(s.text, head+commonFunctions) {
			t.Errorf("%s does not open with its header comment, then the common functions", s.name)
		}
	}
	for name, markers := range scriptMarkers {
		if slices.Contains(markers, markerCommonInsert) && spliced[name].name == "" {
			t.Errorf("scripts/%s has the common marker, but no container runs it spliced", name)
		}
	}
	rendered := map[string]string{"pre-exec snippet": preExecBody, scriptReverseNode.name: scriptReverseNode.text}
	for name, s := range spliced {
		rendered[name] = s.text
	}
	for name, text := range rendered {
		for _, m := range allMarkers {
			if strings.Contains(text, m) {
				t.Errorf("%s still holds %q", name, m)
			}
		}
	}
	if n := strings.Count(preExecBody, carriedRelay); n != 1 {
		t.Errorf("the pre-exec snippet holds the carried relay %d times, want once", n)
	}
	if strings.Contains(preExecBody, "# shellcheck shell=sh") {
		t.Error("the pre-exec snippet holds reverse-preexec.sh's own header")
	}
}

// TestSpliceFailsLoudly: a marker line missing, doubled, or only part of a line stops the
// program, naming the file and the marker.
func TestSpliceFailsLoudly(t *testing.T) {
	const marker = "# --- shadowgate: insert test ---"
	for name, text := range map[string]string{
		"missing":                      "#!/bin/sh\necho hi\n",
		"doubled":                      "#!/bin/sh\n" + marker + "\necho hi\n" + marker + "\n",
		"inside a longer line":         "#!/bin/sh\n  " + marker + "\necho hi\n",
		"last, without a newline":      "#!/bin/sh\n" + marker,
		"only as part of another line": "#!/bin/sh\necho '" + marker + "'\n",
	} {
		t.Run(name, func(t *testing.T) {
			for fn, call := range map[string]func(){
				"splice": func() { splice("scripts/test.sh", text, marker, "echo inserted\n") },
				"after":  func() { after("scripts/test.sh", text, marker) },
			} {
				msg := panicOf(call)
				if !strings.Contains(msg, "scripts/test.sh") || !strings.Contains(msg, marker) {
					t.Errorf("%s: panic %q does not name the file and the marker", fn, msg)
				}
			}
		})
	}
	if msg := panicOf(func() { splice("scripts/test.sh", marker+"\n", marker, "no newline") }); !strings.Contains(msg, marker) {
		t.Errorf("splicing text without a final newline: panic %q", msg)
	}
	if got := splice("f", "a\n"+marker+"\nb\n", marker, "x\ny\n"); got != "a\nx\ny\nb\n" {
		t.Errorf("splice: %q", got)
	}
	if got := after("f", "a\n"+marker+"\nb\n", marker); got != "b\n" {
		t.Errorf("after: %q", got)
	}
}

// panicOf runs f and returns what it panicked with, or "" when it returned.
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestScriptHostRuleAgreesWithGo runs common.sh's valid_dial_host and valid_host, under sh
// and bash (the scripts run under both), on every case of the host rule's shared table, which
// syntax's TestHostTable holds the webhook's rule to: the scripts judge what reaches them from
// a node file or from Slurm exactly as the webhook judges what it admits.
func TestScriptHostRuleAgreesWithGo(t *testing.T) {
	sshtest.Require(t, "sh", "bash")
	script := commonFunctions + "\nvalid_dial_host \"$1\"; echo \"$?\"\nvalid_host \"$1\"; echo \"$?\"\n"
	for name, tc := range vt.HostCases(t) {
		t.Run(name, func(t *testing.T) {
			verdict := map[bool]string{true: "0", false: "1"}
			want := verdict[tc.ByShadow] + " " + verdict[tc.ByLoginNode]
			for _, shell := range []string{"sh", "bash"} {
				out, err := exec.Command(shell, "-c", script, shell, tc.Host).CombinedOutput()
				if strings.Contains(tc.Host, "\x00") {
					// No NUL reaches a script: an argument or environment value cannot hold one,
					// so the container would not start (the webhook refuses it first).
					if err == nil {
						t.Errorf("%s ran with an argument holding NUL", shell)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v\n%s", shell, err, out)
				}
				if got := strings.Join(strings.Fields(string(out)), " "); got != want {
					t.Errorf("%s: valid_dial_host and valid_host of %q exit %s, want %s (Go's verdicts)", shell, tc.Host, got, want)
				}
			}
		})
	}
}

// TestScriptConnectCommandRuleAgreesWithGo runs common.sh's valid_connect_command, under sh and
// bash, on every case of ExecConnectCommand's shared table, which syntax's
// TestConnectCommandTable holds the webhook's rule to.
func TestScriptConnectCommandRuleAgreesWithGo(t *testing.T) {
	sshtest.Require(t, "sh", "bash")
	script := commonFunctions + "\nvalid_connect_command \"$1\"; echo \"$?\"\n"
	for name, tc := range vt.ConnectCommandCases(t) {
		t.Run(name, func(t *testing.T) {
			want := map[bool]string{true: "0", false: "1"}[tc.OK]
			for _, shell := range []string{"sh", "bash"} {
				out, err := exec.Command(shell, "-c", script, shell, tc.Command).CombinedOutput()
				if strings.Contains(tc.Command, "\x00") {
					// As for hosts: no NUL reaches a script, as no argument or environment value holds one.
					if err == nil {
						t.Errorf("%s ran with an argument holding NUL", shell)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v\n%s", shell, err, out)
				}
				if got := strings.TrimSpace(string(out)); got != want {
					t.Errorf("%s: valid_connect_command %q exits %s, want %s (Go's verdict)", shell, tc.Command, got, want)
				}
			}
		})
	}
}
