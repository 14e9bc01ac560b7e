package inject

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/internal/syncbuf"
)

// The shadow image (shadow.Dockerfile), built by hack/build-shadow-image.sh and run with
// Debian's runc as the kubelet runs a shadow container: a read-only root, a uid the image does
// not name, no capabilities, no new privileges, the shadow's volumes bind-mounted where the
// render puts them, each container in network and pid namespaces of its own.

// arbitraryUID is a uid as OpenShift's restricted SCCs assign: no passwd entry in any image.
const arbitraryUID = 1000680000

// shadowRootfs builds the image (or reuses the archive of an earlier build) and unpacks it.
func shadowRootfs(t *testing.T) string {
	t.Helper()
	sshtest.Require(t, "runc", "buildah", "debootstrap")
	if os.Geteuid() != 0 {
		t.Fatal("the shadow image's test builds and runs the image as root (debootstrap, buildah, runc): run it as root")
	}
	out, err := exec.Command("../hack/build-shadow-image.sh").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("hack/build-shadow-image.sh: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	archive, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "shadow=")
	if !ok {
		t.Fatalf("hack/build-shadow-image.sh printed %q, want shadow=<archive>", out)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if err := unpackOCI(archive, rootfs); err != nil {
		t.Fatalf("unpacking %s: %v", archive, err)
	}
	return rootfs
}

// unpackOCI lays out the one image of an OCI archive as a root filesystem: its layers in order,
// each one's whiteouts deleting what the layers below hold.
func unpackOCI(archive, rootfs string) error {
	dir, err := os.MkdirTemp("", "shadow-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if out, err := exec.Command("tar", "-xf", archive, "-C", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, out)
	}
	blob := func(digest string) string { return filepath.Join(dir, "blobs", strings.Replace(digest, ":", "/", 1)) }
	var index struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	if err := readJSON(filepath.Join(dir, "index.json"), &index); err != nil {
		return err
	}
	if len(index.Manifests) != 1 {
		return fmt.Errorf("index.json lists %d manifests, want 1", len(index.Manifests))
	}
	var manifest struct {
		Layers []struct{ Digest, MediaType string } `json:"layers"`
	}
	if err := readJSON(blob(index.Manifests[0].Digest), &manifest); err != nil {
		return err
	}
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return err
	}
	for _, l := range manifest.Layers {
		if err := applyLayer(blob(l.Digest), strings.HasSuffix(l.MediaType, "+gzip"), rootfs); err != nil {
			return fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	return nil
}

func readJSON(file string, v any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// applyLayer extracts one layer: ".wh.<name>" deletes name, ".wh..wh..opq" empties its
// directory of what lower layers put there; everything else is created with its mode and
// owner (tar, which knows every entry type, does the creating).
func applyLayer(file string, gz bool, rootfs string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if gz {
		z, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		r = z
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := filepath.Clean("/" + h.Name)
		base, parent := filepath.Base(name), filepath.Join(rootfs, filepath.Dir(name))
		switch {
		case base == ".wh..wh..opq":
			entries, _ := os.ReadDir(parent)
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
					return err
				}
			}
		case strings.HasPrefix(base, ".wh."):
			if err := os.RemoveAll(filepath.Join(parent, strings.TrimPrefix(base, ".wh."))); err != nil {
				return err
			}
		}
	}
	// The whiteouts are applied; now the layer's files, by tar, which skips none of them.
	if out, err := exec.Command("tar", "--numeric-owner", "-xpf", file, "-C", rootfs, "--exclude=.wh.*", "--exclude=*/.wh.*").CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, out)
	}
	return nil
}

// runcContainer is one container run the way the kubelet runs a shadow container.
type runcContainer struct {
	rootfs  string
	uid     int
	gids    []int // the first is the primary group
	args    []string
	env     []string
	binds   map[string]string // target in the container -> directory or file of the host
	tmp     bool              // a writable /tmp, as the render's tmp emptyDir
	sysctls map[string]string
}

var runcSeq atomic.Int64

// running is a container runc runs in the foreground: out is its output, kill signals it.
type running struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	kill func(signal string) error
}

// start runs c under runc, in a state directory of its own.
func (c runcContainer) start(t *testing.T) running {
	t.Helper()
	bundle := t.TempDir()
	id := fmt.Sprintf("shadow-test-%d-%d", os.Getpid(), runcSeq.Add(1))
	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	if c.tmp {
		mounts = append(mounts, map[string]any{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777", "size=16m"}})
	}
	for target, source := range c.binds {
		mounts = append(mounts, map[string]any{"destination": target, "type": "bind", "source": source, "options": []string{"rbind", "rw"}})
	}
	env := append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, c.env...)
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"user":            map[string]any{"uid": c.uid, "gid": c.gids[0], "additionalGids": c.gids[1:]},
			"args":            c.args,
			"env":             env,
			"cwd":             "/",
			"noNewPrivileges": true,
			"capabilities":    map[string]any{},
		},
		"root":     map[string]any{"path": c.rootfs, "readonly": true},
		"hostname": "shadow",
		"mounts":   mounts,
		"linux": map[string]any{
			"namespaces": []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}},
			"sysctl":     c.sysctls,
		},
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(bundle, "runc")
	cmd := exec.Command("runc", "--root", state, "run", "--bundle", bundle, id)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("runc", "--root", state, "kill", id, "KILL").Run()
		_ = cmd.Wait()
		_ = exec.Command("runc", "--root", state, "delete", "--force", id).Run()
	})
	return running{cmd: cmd, out: out, kill: func(signal string) error {
		return exec.Command("runc", "--root", state, "kill", id, signal).Run()
	}}
}

// run runs c to its end (within a minute) and returns its exit code and output.
func (c runcContainer) run(t *testing.T) (int, string) {
	t.Helper()
	r := c.start(t)
	cmd, out := r.cmd, r.out
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	case <-time.After(time.Minute):
		t.Fatalf("%v has not ended within a minute; so far:\n%s", c.args, out)
	}
	return 0, ""
}

// writeScripts writes the scripts ConfigMap's files into a directory, as the kubelet does.
func writeScripts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range scriptsData {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// shadowState is a directory writable by the shadow's group, as the state emptyDir with fsGroup.
func shadowState(t *testing.T, gid int) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chown(dir, 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o2775); err != nil {
		t.Fatal(err)
	}
	return dir
}

// withCommon is a shell program that has common.sh's functions, then runs body.
func withCommon(body string) string { return commonFunctions + "\n" + body + "\n" }

// TestShadowImage runs the shadow image as the kubelet would, one check per break the image
// and the scripts must not have; each check also runs the way that broke, to show it still
// would.
func TestShadowImage(t *testing.T) {
	rootfs := shadowRootfs(t)
	scripts := writeScripts(t)

	t.Run("any uid runs ssh and ssh-keygen", func(t *testing.T) {
		// Without any_uid, as an image without nss_wrapper would run it: ssh refuses the uid.
		code, out := runcContainer{rootfs: rootfs, uid: arbitraryUID, gids: []int{0, nobody}, tmp: true,
			args: []string{"ssh", "-V"}}.run(t)
		if code == 0 || !strings.Contains(out, fmt.Sprintf("No user exists for uid %d", arbitraryUID)) {
			t.Fatalf("ssh -V as uid %d without a passwd entry: exit %d, %q; want ssh's refusal (the check below would prove nothing)", arbitraryUID, code, out)
		}
		// As ssh-forward and ssh-reverse call it: with globbing off.
		body := `set -f
any_uid
ssh -V 2>&1
ssh-keygen -q -t ed25519 -N '' -C test -f "$HOME/key" </dev/null && echo keygen-ok
id -un`
		code, out = runcContainer{rootfs: rootfs, uid: arbitraryUID, gids: []int{0, nobody}, tmp: true,
			args: []string{"sh", "-c", withCommon(body), "ssh-forward"}}.run(t)
		if code != 0 || !strings.Contains(out, "OpenSSH_") || !strings.Contains(out, "keygen-ok") || !strings.HasSuffix(strings.TrimSpace(out), "shadow") {
			t.Errorf("the scripts' any_uid as uid %d: exit %d, output %q; want ssh -V and ssh-keygen to work as user shadow", arbitraryUID, code, out)
		}
		// The image's entrypoint does the same for a command run in the image.
		code, out = runcContainer{rootfs: rootfs, uid: arbitraryUID, gids: []int{0}, tmp: true,
			args: []string{"/usr/bin/tini", "--", "/bin/sh", "/usr/lib/shadowgate/entrypoint", "ssh", "-V"}}.run(t)
		if code != 0 || !strings.Contains(out, "OpenSSH_") {
			t.Errorf("the entrypoint's ssh -V as uid %d: exit %d, %q", arbitraryUID, code, out)
		}
	})

	t.Run("an image without nss_wrapper runs as nobody and names the fix for another uid", func(t *testing.T) {
		// Another image with the upstream packages alone: this one without libnss-wrapper.
		other := filepath.Join(t.TempDir(), "rootfs")
		if out, err := exec.Command("cp", "-a", rootfs, other).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		libs, _ := filepath.Glob(filepath.Join(other, "usr/lib/*/libnss_wrapper.so"))
		if len(libs) == 0 {
			t.Fatal("the image has no libnss_wrapper.so to remove")
		}
		for _, l := range libs {
			if err := os.Remove(l); err != nil {
				t.Fatal(err)
			}
		}
		code, out := runcContainer{rootfs: other, uid: nobody, gids: []int{nobody}, tmp: true,
			args: []string{"sh", "-c", withCommon("any_uid\nssh -V"), "ssh-forward"}}.run(t)
		if code != 0 || !strings.Contains(out, "OpenSSH_") {
			t.Errorf("as nobody in an image without nss_wrapper: exit %d, %q; want ssh -V to work", code, out)
		}
		state := shadowState(t, 0)
		code, out = runcContainer{rootfs: other, uid: arbitraryUID, gids: []int{0}, tmp: true,
			binds: map[string]string{"/run/shadow": state},
			env:   []string{"SHADOW_TERMINATION_LOG=/run/shadow/termination"},
			args:  []string{"sh", "-c", withCommon("any_uid\nssh -V"), "ssh-forward"}}.run(t)
		msg, _ := os.ReadFile(filepath.Join(state, "termination"))
		if code == 0 || !strings.HasPrefix(string(msg), "TunnelDown: uid 1000680000 has no passwd entry") || !strings.Contains(string(msg), "libnss-wrapper") {
			t.Errorf("uid %d in an image without nss_wrapper: exit %d, termination message %q, output %q; want TunnelDown naming libnss-wrapper", arbitraryUID, code, msg, out)
		}
	})

	t.Run("a volume below /etc/shadow cannot be mounted", func(t *testing.T) {
		code, out := runcContainer{rootfs: rootfs, uid: nobody, gids: []int{nobody},
			binds: map[string]string{"/etc/shadow/scripts": scripts}, args: []string{"true"}}.run(t)
		if code == 0 || !strings.Contains(out, "not a directory") {
			t.Errorf("mounting at /etc/shadow/scripts: exit %d, %q; want runc's refusal (the image's /etc/shadow is a file)", code, out)
		}
		code, out = runcContainer{rootfs: rootfs, uid: nobody, gids: []int{nobody},
			binds: map[string]string{scriptsDir: scripts}, args: []string{"test", "-s", scriptPath(scriptForward)}}.run(t)
		if code != 0 {
			t.Errorf("mounting the scripts at %s: exit %d, %q", scriptsDir, code, out)
		}
	})

	t.Run("classify reads a file over 64 KiB on a read-only root", func(t *testing.T) {
		state := shadowState(t, nobody)
		line := "channel 3: open failed: connect failed: Connection refused\n"
		if err := os.WriteFile(filepath.Join(state, "ssh-forward.err"), []byte(strings.Repeat(line, 1300)), 0o644); err != nil {
			t.Fatal(err)
		}
		// No /tmp: the root is read-only, so a here-document of the file would fail.
		code, out := runcContainer{rootfs: rootfs, uid: nobody, gids: []int{nobody},
			binds: map[string]string{"/run/shadow": state},
			args: []string{"bash", "-c", withCommon(`set -euo pipefail
cat <<EOF >/dev/null || echo "here-document refused"
$(cat /run/shadow/ssh-forward.err)
EOF
classify /run/shadow/ssh-forward.err
echo "reason=$cl_reason"`), "ssh-forward"}}.run(t)
		if !strings.Contains(out, "here-document refused") {
			t.Errorf("a here-document of 78 KB on the read-only root was not refused (%q): the check below proves nothing", out)
		}
		if code != 0 || !strings.Contains(out, "reason=NodeConnectionRefused") {
			t.Errorf("classify over 78 KB without a writable /tmp: exit %d, %q; want reason=NodeConnectionRefused", code, out)
		}
	})

	t.Run("PID 1 ends promptly on TERM", func(t *testing.T) {
		node := t.TempDir()
		if err := os.WriteFile(filepath.Join(node, "compute-node"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			args []string
			env  []string
		}{
			{"wait-for-node", runScript(scriptWaitForNode, containerWaitForNode), []string{
				"SHADOW_NODE_FILE=" + nodeDir + "/compute-node", "SHADOW_NODE_CONFIGMAP=user/node", "SHADOW_NODE_WAIT_SECONDS=3600",
				"SHADOW_POLL_INTERVAL=600"}},
			{"krb-refresh", runScript(scriptKerberos, containerKrbRefresh), []string{
				"SHADOW_KRB_PRINCIPAL=alice@EXAMPLE.ORG", "SHADOW_KRB_KEYTAB=/dev/null", "KRB5CCNAME=FILE:/run/shadow/krb5cc",
				"KRB5_CONFIG=/dev/null", "SHADOW_KRB_REFRESH_SECONDS=3600"}},
			{"the entrypoint", []string{"/usr/bin/tini", "--", "/bin/sh", "/usr/lib/shadowgate/entrypoint", "sh", "-c", "echo up; exec sleep 600"}, nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				state := shadowState(t, nobody)
				r := runcContainer{rootfs: rootfs, uid: nobody, gids: []int{nobody}, tmp: true,
					binds: map[string]string{scriptsDir: scripts, nodeDir: node, "/run/shadow": state},
					env:   append([]string{"SHADOW_STATE_DIR=/run/shadow"}, c.env...), args: c.args}.start(t)
				done := make(chan struct{})
				go func() { _ = r.cmd.Wait(); close(done) }()
				// Past the point where it handles TERM: its first status line, or its first
				// word on its output.
				deadline := time.Now().Add(30 * time.Second)
				for !started(c.name, state, r.out.String()) {
					if time.Now().After(deadline) {
						t.Fatalf("%s did not start: %s", c.name, r.out)
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err := r.kill("TERM"); err != nil {
					t.Fatalf("runc kill TERM: %v", err)
				}
				select {
				case <-done:
				case <-time.After(15 * time.Second):
					t.Fatalf("%s still runs 15 s after TERM (a kubelet's grace period is 30 s): %s", c.name, r.out)
				}
			})
		}
	})

	t.Run("a status file of a previous run is not this run's", func(t *testing.T) {
		state := shadowState(t, nobody)
		status := filepath.Join(state, statusDir, containerForward)
		ready := fmt.Sprintf("%d Ready: forwarding ports 8888 to node07 through login\n", time.Now().Unix()-5)
		write := func() {
			if err := os.MkdirAll(filepath.Dir(status), 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(filepath.Dir(status), nobody, nobody); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(status, []byte(ready), 0o666); err != nil {
				t.Fatal(err)
			}
		}
		// The probe, run in a container started after the line was written (its PID 1 is
		// the probe's shell), does not take it for this container's.
		write()
		probe := statusProbe(containerForward).Exec.Command
		code, out := runcContainer{rootfs: rootfs, uid: nobody, gids: []int{nobody},
			binds: map[string]string{scriptsDir: scripts, "/run/shadow": state}, args: probe}.run(t)
		if code == 0 || !strings.HasPrefix(out, "Connecting: ") {
			t.Errorf("the probe on a Ready line older than its container: exit %d, %q; want Connecting", code, out)
		}
		// ssh-forward removes it as it starts, before anything can fail.
		code, out = runcContainer{rootfs: rootfs, uid: nobody, gids: []int{nobody}, tmp: true,
			binds: map[string]string{scriptsDir: scripts, "/run/shadow": state},
			env: []string{"SHADOW_STATE_DIR=/run/shadow", "SHADOW_LOGIN_HOST=login.example.org", "SHADOW_FORWARD_MODE=portforward",
				"SHADOW_SSH_OPTIONS=User=alice", "SHADOW_NODE_FILE=/dev/null", "SHADOW_PORTS=notaport"},
			args: runScript(scriptForward, containerForward)}.run(t)
		if code == 0 || !strings.Contains(out, "SHADOW_PORTS holds 'notaport'") {
			t.Fatalf("ssh-forward with a bad port: exit %d, %q; want its refusal", code, out)
		}
		if _, err := os.Stat(status); !os.IsNotExist(err) {
			t.Errorf("ssh-forward left the previous run's status file (%v)", err)
		}
	})

	t.Run("kerberos without Krb5ConfigMap names it", func(t *testing.T) {
		state := shadowState(t, nobody)
		code, out := runcContainer{rootfs: rootfs, uid: nobody, gids: []int{nobody}, tmp: true,
			binds: map[string]string{scriptsDir: scripts, "/run/shadow": state},
			env: []string{"SHADOW_STATE_DIR=/run/shadow", "SHADOW_KRB_PRINCIPAL=alice@EXAMPLE.ORG", "SHADOW_KRB_KEYTAB=/dev/null",
				"KRB5CCNAME=FILE:/run/shadow/krb5cc", "SHADOW_TERMINATION_LOG=/run/shadow/termination"},
			args: runScript(scriptKerberos, containerKinit)}.run(t)
		msg, _ := os.ReadFile(filepath.Join(state, "termination"))
		if code == 0 || !strings.HasPrefix(string(msg), "KerberosFailed: no Kerberos configuration") || !strings.Contains(string(msg), "Krb5ConfigMap") {
			t.Errorf("kinit in the image without KRB5_CONFIG: exit %d, termination message %q, output %q; want KerberosFailed naming Krb5ConfigMap", code, msg, out)
		}
	})

	t.Run("port 80 binds with the pod's sysctl", func(t *testing.T) {
		b := &builder{ports: []shadowPort{{Name: "http", Port: 80}, {Name: "alt", Port: 8080}}}
		sysctls := map[string]string{}
		for _, s := range b.lowPortSysctl() {
			sysctls[s.Name] = s.Value
		}
		listen := []string{"timeout", "2", "socat", "-u", "TCP4-LISTEN:80,bind=127.0.0.1", "STDOUT"}
		// Without the sysctl, as the shadow pod was rendered: the bind is refused.
		code, out := runcContainer{rootfs: rootfs, uid: nobody, gids: []int{nobody}, args: listen}.run(t)
		if code != 1 || !strings.Contains(out, "Permission denied") {
			t.Fatalf("listening on port 80 as nobody without the sysctl: exit %d, %q; want the bind refused (the check below would prove nothing)", code, out)
		}
		code, out = runcContainer{rootfs: rootfs, uid: nobody, gids: []int{nobody}, sysctls: sysctls, args: listen}.run(t)
		if code != 124 {
			t.Errorf("listening on port 80 as nobody with %v: exit %d, %q; want it listening until timeout ends it (124)", sysctls, code, out)
		}
	})
}

// started says whether the container under test is past setting its TERM handler:
// krb-refresh has written its status, wait-for-node has logged that it waits, and the
// entrypoint's command (which tini starts once it handles signals) has said it is up.
func started(name, state, out string) bool {
	switch name {
	case "krb-refresh":
		_, err := os.Stat(filepath.Join(state, "status", containerKrbRefresh))
		return err == nil
	case "wait-for-node":
		return strings.Contains(out, "waiting for the compute node")
	}
	return strings.Contains(out, "up\n")
}
