package inject

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/inject/goldencase"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current output")

// goldenCase is testdata/<name>.yaml: a policy document, ---, and a Pod.
type goldenCase struct {
	name   string
	policy *policy.Policy
	pod    *corev1.Pod
}

func goldenCases(t *testing.T) []goldenCase {
	t.Helper()
	read, err := goldencase.Read("testdata")
	if err != nil {
		t.Fatal(err)
	}
	cases := make([]goldenCase, len(read))
	for i, c := range read {
		pod := &corev1.Pod{}
		if err := yaml.UnmarshalStrict(c.PodYAML, pod); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		cases[i] = goldenCase{name: c.Name, policy: c.Policy, pod: pod}
	}
	return cases
}

// shadowCases are the golden cases whose pod belongs to a listed virtual node, and so gets a
// shadow; TestGolden holds the others to their golden files, which say the pod is admitted
// unchanged.
func shadowCases(t *testing.T) []goldenCase {
	t.Helper()
	var cases []goldenCase
	for _, c := range goldenCases(t) {
		if c.render(t).Offload != nil {
			cases = append(cases, c)
		}
	}
	return cases
}

// notOffloaded is a golden file's whole content, after any warnings, for a pod that belongs to
// no listed virtual node: the webhook admits it as it is, without a shadow.
const notOffloaded = "# admitted unchanged: the pod belongs to no virtual node the policy lists, so it has no shadow\n"

// render takes a case through both phases as the webhook and `shadowgate render` do, failing
// the test if the pod is refused. A case that asks for the reverse tunnel names its bind
// address, so the golden file does not depend on the one the mutating phase would choose.
func (c goldenCase) render(t *testing.T) Rendering {
	t.Helper()
	r := Render(c.pod, validate.Config{Policy: c.policy})
	if !r.Decision.Allowed() {
		t.Fatalf("%s: pod refused: %v", c.name, r.Decision.Errors.ToAggregate())
	}
	return r
}

// shadowOf is the shadow of a case that gets one, and the warnings said on the way.
func (c goldenCase) shadowOf(t *testing.T) (*Shadow, []string) {
	t.Helper()
	r := c.render(t)
	if r.Shadow == nil {
		t.Fatalf("%s: no shadow", c.name)
	}
	return r.Shadow, r.Decision.Warnings
}

// TestGolden compares every shadow object of each case, whole, with
// testdata/<case>.golden.yaml (for a pod of no listed virtual node, that it is admitted
// unchanged); `go test ./inject -run TestGolden -update` rewrites them. The scripts ConfigMap
// is left out, as it is the same for every case (TestScriptsConfigMap holds it), and its name
// is written as <scripts ConfigMap> (withScriptNames), so the scripts are read once, in scripts/.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			r := c.render(t)
			for _, w := range r.Decision.Warnings {
				fmt.Fprintf(&out, "# warning: %s\n", w)
			}
			if r.Offload == nil {
				out.WriteString(notOffloaded)
				compareGolden(t, c.name, out.Bytes())
				return
			}
			if r.Shadow == nil {
				t.Fatalf("%s: no shadow", c.name)
			}
			for i, obj := range r.Shadow.Objects() {
				if d, ok := obj.(*appsv1.Deployment); ok {
					obj = withScriptNames(t, d)
				}
				data, err := yaml.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				if i > 0 {
					out.WriteString("---\n")
				}
				out.Write(data)
			}
			compareGolden(t, c.name, out.Bytes())
		})
	}
}

// compareGolden compares what a case rendered with testdata/<name>.golden.yaml, or with -update
// rewrites that file.
func compareGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name+".golden.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./inject -run TestGolden -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from what the case renders (rerun with -update and review the diff):\n%s", golden, lineDiff(string(want), string(got)))
	}
}

// withScriptNames returns a copy of d with the scripts ConfigMap's name in its volume written as
// <scripts ConfigMap>, failing the test if a command or probe runs anything but an embedded
// script from the scripts volume by its own shell, or a variable that names a script names
// another file: a golden file shows what a case changes, and a change to a script changes
// the name (the hash of the content) without changing what any case renders.
func withScriptNames(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	d = d.DeepCopy()
	spec := &d.Spec.Template.Spec
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		checkRunsScript(t, c.Name, c.Command)
		if p := c.ReadinessProbe; p != nil && p.Exec != nil {
			checkRunsScript(t, c.Name+" readiness probe", p.Exec.Command)
		}
		for _, e := range c.Env {
			if want, ok := map[string]script{envExecRelay: scriptExecRelay, envReverseHop: scriptReverseHop, envReverseNodeScript: scriptReverseNode}[e.Name]; ok && e.Value != scriptPath(want) {
				t.Fatalf("container %s: %s is %q, want %q", c.Name, e.Name, e.Value, scriptPath(want))
			}
		}
	}
	for i := range spec.Volumes {
		if cm := spec.Volumes[i].ConfigMap; cm != nil && spec.Volumes[i].Name == volumeScripts {
			if cm.Name != scriptsName {
				t.Fatalf("the scripts volume mounts ConfigMap %s, want %s", cm.Name, scriptsName)
			}
			cm.Name = "<scripts ConfigMap>"
		}
	}
	return d
}

// checkRunsScript fails the test unless command is runScript of an embedded script.
func checkRunsScript(t *testing.T, what string, command []string) {
	t.Helper()
	for _, s := range shadowScripts {
		if len(command) >= 4 && slices.Equal(command[:3], runScript(s, "")[:3]) {
			return
		}
	}
	t.Fatalf("%s: command %q does not run an embedded script from the scripts volume by its shell", what, command)
}

// lineDiff lists the lines that differ, enough to see what changed without a diff tool.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  golden: %s\n  got:    %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
