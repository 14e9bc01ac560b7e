package launcher

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The site's unprivileged accounts the test runs the launcher as.
var accounts = []string{"sgrevjob", "sgrevother"}

type run struct {
	env  []string // added to a plain environment
	args []string // after "singularity"
	// wantOut is what the output must hold; wantCode the exit code.
	wantOut  []string
	wantCode int
}

// TestLauncherAsUnprivilegedUsers runs the launcher as each site account, without root:
// binds as a non-root user can make them, the user's identity inside, exit codes through.
func TestLauncherAsUnprivilegedUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test switches to the site's unprivileged accounts, so it runs as root")
	}
	launcher, err := filepath.Abs("singularity")
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is private to root, and the accounts must reach the files.
	dir, err := os.MkdirTemp("", "sglauncher-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	hosts := filepath.Join(dir, "hosts")
	must(t, os.WriteFile(hosts, []byte("127.8.9.10 redis.user.svc.cluster.local redis\n"), 0o644))
	otherHosts := filepath.Join(dir, "other-hosts")
	must(t, os.WriteFile(otherHosts, []byte("127.1.1.1 apptainer-wins\n"), 0o644))
	data := filepath.Join(dir, "data")
	must(t, os.Mkdir(data, 0o755))
	must(t, os.WriteFile(filepath.Join(data, "input"), []byte("from the host\n"), 0o644))
	envFile := filepath.Join(dir, "env")
	must(t, os.WriteFile(envFile, []byte("FROM_FILE='it'\\''s $(not) run'\n"), 0o644))
	hostHosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range accounts {
		acct, err := user.Lookup(name)
		if err != nil {
			t.Fatalf("the site account %s: %v", name, err)
		}
		uid, _ := strconv.Atoi(acct.Uid)
		gid, _ := strconv.Atoi(acct.Gid)
		writable := filepath.Join(dir, "rw-"+name)
		must(t, os.Mkdir(writable, 0o755))
		must(t, os.Chown(writable, uid, gid))
		cases := map[string]run{
			"a file bound over /etc/hosts through SINGULARITY_BIND is what the command reads": {
				env:     []string{"SINGULARITY_BIND=" + hosts + ":/etc/hosts"},
				args:    []string{"exec", "docker://busybox", "getent", "hosts", "redis"},
				wantOut: []string{"127.8.9.10"},
			},
			"APPTAINER_BIND is read in place of SINGULARITY_BIND when both are set": {
				env:     []string{"SINGULARITY_BIND=" + hosts + ":/etc/hosts", "APPTAINER_BIND=" + otherHosts + ":/etc/hosts"},
				args:    []string{"exec", "img", "cat", "/etc/hosts"},
				wantOut: []string{"apptainer-wins"},
			},
			"a --bind of a directory shows its files": {
				args:    []string{"exec", "--bind", data + ":/mnt", "img", "cat", "/mnt/input"},
				wantOut: []string{"from the host"},
			},
			"a ro bind is read-only": {
				args:     []string{"exec", "-B", writable + ":/mnt:ro", "img", "touch", "/mnt/x"},
				wantOut:  []string{"Read-only file system"},
				wantCode: 1,
			},
			"a rw bind is written through to the host as the user": {
				args:    []string{"exec", "--bind=" + writable + ":/mnt", "img", "sh", "-c", "echo written > /mnt/out && stat -c %U /mnt/out"},
				wantOut: []string{name},
			},
			"the command's exit code passes through": {
				args:     []string{"exec", "img", "sh", "-c", "exit 42"},
				wantCode: 42,
			},
			"the command runs as the invoking user, not as the namespace's root": {
				args:    []string{"exec", "--bind", hosts + ":/etc/hosts", "img", "id"},
				wantOut: []string{"uid=" + acct.Uid + "(" + name + ")", "gid=" + acct.Gid + "("},
			},
			"a destination that does not exist fails naming it": {
				args:     []string{"exec", "--bind", data + ":/no/such/dir", "img", "true"},
				wantOut:  []string{"/no/such/dir does not exist"},
				wantCode: 255,
			},
			"--env and --env-file reach the command, and --cleanenv drops the rest": {
				env:     []string{"LEAK=yes"},
				args:    []string{"exec", "--cleanenv", "--env", "GREETING=hello world", "--env-file", envFile, "img", "sh", "-c", `echo "$GREETING|$FROM_FILE|${LEAK:-dropped}"`},
				wantOut: []string{"hello world|it's $(not) run|dropped"},
			},
			"the plugin's default options are accepted, --containall dropping the environment": {
				env:     []string{"LEAK=yes"},
				args:    []string{"exec", "--nv", "--no-eval", "--containall", "img", "sh", "-c", `echo "${LEAK:-dropped}"`},
				wantOut: []string{"--nv: this host has no NVIDIA GPU", "dropped"},
			},
			"an option the stand-in does not implement is refused": {
				args:     []string{"exec", "--fakeroot", "img", "true"},
				wantOut:  []string{"option --fakeroot is not supported by the site's stand-in"},
				wantCode: 255,
			},
			"run of an image whose entrypoint the stand-in does not know is refused naming it": {
				args:     []string{"run", "--nv", "--no-eval", "--containall", "docker://busybox"},
				wantOut:  []string{"run docker://busybox: no image is pulled", "give the container a command"},
				wantCode: 255,
			},
			"run of the notebook image without the job directory is refused": {
				args:     []string{"run", "docker://jupyter/scipy-notebook"},
				wantOut:  []string{"SANDBOX"},
				wantCode: 255,
			},
			"a verb other than exec and run is refused": {
				args:     []string{"shell", "img"},
				wantOut:  []string{"not 'shell'"},
				wantCode: 255,
			},
		}
		for what, c := range cases {
			t.Run(name+"/"+what, func(t *testing.T) {
				cmd := exec.Command(launcher, c.args...)
				cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LANG=C"}, c.env...)
				cmd.Dir = "/"
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				err := cmd.Run()
				code := 0
				if exit, ok := err.(*exec.ExitError); ok {
					code = exit.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				if code != c.wantCode {
					t.Errorf("exit code %d, want %d; output:\n%s", code, c.wantCode, out.String())
				}
				for _, want := range c.wantOut {
					if !strings.Contains(out.String(), want) {
						t.Errorf("output lacks %q:\n%s", want, out.String())
					}
				}
			})
		}
	}
	if after, _ := os.ReadFile("/etc/hosts"); !bytes.Equal(after, hostHosts) {
		t.Error("the host's /etc/hosts changed: a bind left the command's mount namespace")
	}
}

// TestLauncherRunsTheNotebookImage: `singularity run` of the notebook image with the plugin's
// default options, as the plugin writes a container without a command, serves the page in the
// job directory on Jupyter's port. It runs as a site account in a network namespace of its own,
// so the port is the namespace's.
func TestLauncherRunsTheNotebookImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test switches to the site's unprivileged accounts, so it runs as root")
	}
	launcher, err := filepath.Abs("singularity")
	must(t, err)
	dir, err := os.MkdirTemp("", "sglauncher-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	must(t, os.Mkdir(filepath.Join(dir, "stand-in"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "stand-in", "index.html"), []byte("stand-in notebook for pod user/notebook\n"), 0o644))
	acct, err := user.Lookup(accounts[0])
	must(t, err)
	// As the account: start the run, fetch the page once it answers (a generous bound for a
	// loaded machine), then stop the server.
	script := `"$1" run --nv --no-eval --containall docker://jupyter/scipy-notebook & pid=$!
for _ in $(seq 600); do
  if page=$(python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:8888/", timeout=5).read().decode())' 2>/dev/null); then
    printf 'fetched: %s\n' "$page"
    break
  fi
  kill -0 "$pid" 2>/dev/null || { echo "the launcher ended"; wait "$pid"; exit 1; }
  sleep 0.1
done
kill "$pid"`
	cmd := exec.Command("unshare", "--net", "--", "bash", "-c", `ip link set lo up && exec setpriv --reuid="$1" --regid="$2" --clear-groups -- bash -c "$3" bash "$4"`,
		"bash", acct.Uid, acct.Gid, script, launcher)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LANG=C", "SANDBOX=" + dir}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fetched: stand-in notebook for pod user/notebook") {
		t.Fatalf("the notebook image's run served no page (%v):\n%s", err, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
