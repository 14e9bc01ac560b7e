package sshtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Require points at hack/test-deps.sh. When apt-get fails there, its own message says nothing
// of the tests: the script's must name the packages and the tools they were for.
func TestDepsScriptNamesWhatItCouldNotInstall(t *testing.T) {
	bin := t.TempDir()
	// A PATH of only these: the tools outside /usr/sbin are missing, the script believes it
	// is root, and apt-get fails as it does without package sources.
	for name, script := range map[string]string{
		"id":      "#!/bin/sh\necho 0\n",
		"apt-get": "#!/bin/sh\necho 'E: Unable to locate package shellcheck' >&2\nexit 100\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"bash", "sort"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "bash"), "../../hack/test-deps.sh")
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("test-deps.sh succeeded although apt-get failed:\n%s", out)
	}
	for _, want := range []string{"E: Unable to locate package", "test-deps: apt-get could not install",
		"shellcheck", "slurm-client", "the tests lack", "srun"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}
