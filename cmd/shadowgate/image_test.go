package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// dockerfile is the image's Dockerfile: its build stage's `go build` line, where that stage
// leaves the binary, and the final stage's instructions.
type dockerfile struct {
	build, out string
	final      []string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]string
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "FROM "):
			stages = append(stages, []string{line})
		case len(stages) > 0:
			stages[len(stages)-1] = append(stages[len(stages)-1], line)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a final one", len(stages))
	}
	var d dockerfile
	d.final = stages[len(stages)-1]
	for _, in := range d.final {
		if m := regexp.MustCompile(`^COPY --from=build (\S+) `).FindStringSubmatch(in); m != nil {
			d.out = m[1]
		}
	}
	for _, in := range stages[0] {
		if run, ok := strings.CutPrefix(in, "RUN "); ok && strings.Contains(run, "go build") {
			d.build = run
		}
	}
	if d.build == "" || d.out == "" || !strings.Contains(d.build, d.out) {
		t.Fatalf("no `RUN ... go build -o X` in the first stage whose X the final stage copies:\n%s", b)
	}
	return d
}

// The image's binary is built by the Dockerfile's own `go build` line, run by sh as docker
// runs a RUN line, with a version as `make image` passes it. It must be static (no program
// interpreter, no shared library: it runs on distroless/static or scratch), hold no path of
// the build machine (-trimpath), and report the version.
func TestImageBinaryIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test builds the image's binary with the Dockerfile's go build line; make test runs it")
	}
	d := readDockerfile(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "shadowgate")
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(d.build, d.out, bin))
	cmd.Dir = root
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
	d := readDockerfile(t)
	base := strings.Fields(d.final[0])[1]
	if base != "scratch" && !strings.HasPrefix(base, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s: want scratch or gcr.io/distroless/static, which hold no shell", base)
	}
	var user, entrypoint string
	for _, in := range d.final {
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
