package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// finalStage returns the Dockerfile's instructions, its FROM with the base ARG's default.
func finalStage(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]string{}
	var stage []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "ARG ") && stage == nil:
			name, value, _ := strings.Cut(strings.TrimPrefix(line, "ARG "), "=")
			args[name] = value
		case strings.HasPrefix(line, "FROM "):
			stage = []string{os.Expand(line, func(name string) string { return args[name] })}
		case stage != nil:
			stage = append(stage, line)
		}
	}
	if stage == nil {
		t.Fatalf("the Dockerfile has no FROM:\n%s", b)
	}
	return stage
}

// The image's binary is built by hack/build-image.sh, as `make image` builds it, with a
// version. It must be static (no program interpreter, no shared library: it runs on
// distroless/static or scratch), hold no path of the build machine (-trimpath), and report the
// version.
func TestImageBinaryIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test builds the image's binary with hack/build-image.sh; make test runs it")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "shadowgate")
	cmd := exec.Command(filepath.Join(root, "hack/build-image.sh"), "binary", bin)
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-imagetest")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a program interpreter (PT_INTERP): it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries (DT_NEEDED) %v (%v)", libs, err)
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(root)) {
		t.Errorf("the binary holds the build path %s: -trimpath is missing", root)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "shadowgate v0.0.0-imagetest ") {
		t.Errorf("shadowgate version printed %q (%v), want the VERSION build arg", out, err)
	}
}

// The final stage runs the binary with no shell as a numeric non-root user, so Kubernetes can
// check runAsNonRoot and no `sh -c` form can run.
func TestImageRunsAsNumericNonRootWithoutShell(t *testing.T) {
	final := finalStage(t)
	base := strings.Fields(final[0])[1]
	if base != "scratch" && !strings.HasPrefix(base, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s: want scratch or gcr.io/distroless/static, which hold no shell", base)
	}
	var user, entrypoint string
	for _, in := range final {
		if v, ok := strings.CutPrefix(in, "USER "); ok {
			user = v
		}
		if v, ok := strings.CutPrefix(in, "ENTRYPOINT "); ok {
			entrypoint = v
		}
	}
	uid, gid, _ := strings.Cut(user, ":")
	for _, id := range []string{uid, gid} {
		if n, err := strconv.Atoi(id); err != nil || n == 0 {
			t.Errorf("USER %q: want numeric non-zero user:group ids", user)
		}
	}
	if !strings.HasPrefix(entrypoint, "[") {
		t.Errorf("ENTRYPOINT %s: want the exec (JSON) form; the shell form needs /bin/sh", entrypoint)
	}
}
