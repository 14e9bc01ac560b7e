package inject

import (
	"os/exec"
	"path"
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/inject/internal/sshtest"
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
			scripts[ctr.Command[2]] = rendered{ctr.Command[0], ctr.Name}
			if relay := envValue(ctr, EnvExecRelay); relay != "" {
				scripts[relay] = rendered{shebang(t, relay), ctr.Name + " " + EnvExecRelay}
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

func shebang(t *testing.T, text string) string {
	t.Helper()
	first, _, _ := strings.Cut(text, "\n")
	shell, ok := strings.CutPrefix(first, "#!")
	if !ok {
		t.Fatalf("script without a #! line:\n%s", text)
	}
	return shell
}
