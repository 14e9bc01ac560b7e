package harness

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The HPC side on its own (no control plane): a login node stopped and started again, and
// the sbatch flags that keep a job from ever starting.
func TestSite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the site creates Unix accounts and a network namespace and runs sshd and Slurm as root: run this test as root")
	}
	// Not t.TempDir: its parent is private to root, and the site's accounts must reach it.
	dir, err := os.MkdirTemp("", "sgsite-test-")
	if err != nil {
		t.Fatal(err)
	}
	site, err := StartSite(dir, SiteLogin{Name: "hpc"})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := site.Stop(); err != nil {
			t.Error(err)
		}
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	t.Run("StopLogin ends its sessions and StartLogin lets new ones in", func(t *testing.T) { testStopStartLogin(t, site) })
	t.Run("PendingJobFlags keep a job pending", func(t *testing.T) { testPendingJob(t, site) })
}

func testStopStartLogin(t *testing.T, site *Site) {
	hpc := site.Logins["hpc"]
	knownHosts := filepath.Join(site.Dir, "test_known_hosts")
	if err := os.WriteFile(knownHosts, []byte(hpc.KnownHosts+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The host key is pinned: a login after StartLogin proves the same key came back.
	ssh := func(command string) *exec.Cmd {
		return exec.Command("ssh", "-i", site.Key, "-p", strconv.Itoa(hpc.Port), "-o", "BatchMode=yes",
			"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+knownHosts, "-o", "ConnectTimeout=5",
			SiteAccount+"@"+hpc.Host, command)
	}
	// A sleep of a length no other process has, to find it on the login side.
	marker := strconv.Itoa(7000 + int(time.Now().UnixNano()%1000))
	session := ssh("echo in; exec sleep " + marker)
	stdout, err := session.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "in\n" {
		_ = session.Process.Kill()
		t.Fatalf("session did not start: %q %v", line, err)
	}
	if !sleeping(t, marker) {
		t.Fatal("the session's sleep is not running on the login node")
	}
	if err := site.StopLogin("hpc"); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- session.Wait() }()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the session ended cleanly; it should have lost its connection")
		}
	case <-time.After(10 * time.Second):
		_ = session.Process.Kill()
		t.Fatal("the session is still connected 10s after StopLogin")
	}
	if sleeping(t, marker) {
		t.Error("the session's sleep outlived StopLogin")
	}
	if out, err := ssh("echo in").CombinedOutput(); err == nil || !strings.Contains(string(out), "Connection refused") {
		t.Errorf("a login while stopped: %v %s; want connection refused", err, out)
	}
	if err := site.StopLogin("hpc"); err == nil {
		t.Error("StopLogin of a stopped login node did not say so")
	}
	if err := site.StartLogin("hpc"); err != nil {
		t.Fatal(err)
	}
	if out, err := ssh("echo again").CombinedOutput(); err != nil || string(out) != "again\n" {
		t.Fatalf("a login after StartLogin: %v %q", err, out)
	}
	if err := site.StartLogin("hpc"); err == nil {
		t.Error("StartLogin of a running login node did not say so")
	}
}

// sleeping says whether a process "sleep <marker>" runs on this machine.
func sleeping(t *testing.T, marker string) bool {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(cmdline) == "sleep\x00"+marker+"\x00" {
			return true
		}
	}
	return false
}

// A job with PendingJobFlags stays PENDING while the same job without them runs at once, so
// it is the flags, not a slow scheduler, that hold it back; --hold does the same until
// scontrol release.
func testPendingJob(t *testing.T, site *Site) {
	submit := func(flags ...string) string {
		t.Helper()
		args := append([]string{"-u", SiteAccount, "--", "sbatch", "--parsable", "--output=/dev/null"}, flags...)
		out, err := site.Slurm("runuser", append(args, "--wrap=sleep 30")...).CombinedOutput()
		if err != nil {
			t.Fatalf("sbatch %v: %v %s", flags, err, out)
		}
		id := strings.TrimSpace(string(out))
		t.Cleanup(func() { _ = site.Slurm("scancel", id).Run() })
		return id
	}
	state := func(id string) string {
		t.Helper()
		out, err := site.Slurm("squeue", "-h", "-j", id, "-o", "%T %r").CombinedOutput()
		if err != nil {
			t.Fatalf("squeue -j %s: %v %s", id, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	pending := submit(strings.Fields(PendingJobFlags)...)
	held := submit("--hold")
	control := submit()
	running := func(id string) func() (bool, string) {
		return func() (bool, string) { got := state(id); return strings.HasPrefix(got, "RUNNING"), got }
	}
	Eventually(t, 30*time.Second, "the control job running", running(control))
	time.Sleep(3 * time.Second) // scheduling passes that would start the others had they been eligible
	if got := state(pending); got != "PENDING BeginTime" {
		t.Errorf("job with %s: %q, want PENDING BeginTime", PendingJobFlags, got)
	}
	if got := state(held); got != "PENDING JobHeldUser" {
		t.Errorf("job with --hold: %q, want PENDING JobHeldUser", got)
	}
	_ = site.Slurm("scancel", control).Run() // the node's CPU for the released job
	if out, err := site.Slurm("scontrol", "release", held).CombinedOutput(); err != nil {
		t.Fatalf("scontrol release: %v %s", err, out)
	}
	Eventually(t, 30*time.Second, "the released job running", running(held))
}
