package offload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/internal/syncbuf"
)

// A pod whose job Slurm holds (--begin=now+1hour) shows why on the pod itself: Slurm's reason
// (BeginTime) and expected start reach its TunnelWaitingForNode Event (kubectl describe pod),
// its Tunnel and kubectl shadowgate status; and kubectl shadowgate status -A -w, started
// before the pod, shows the tunnel go from WaitingForNode to Ready once the job runs.
func TestAQueuedJobShowsSlurmsReasonUntilItRuns(t *testing.T) {
	const ns = "tf-queued"
	watch := statusWatch(t, "-A", "-w")
	uid, s, user := startOffloaded(t, ns, offloadedPod(ns, harness.HPCNode, map[string]string{"slurm-job.vk.io/flags": harness.PendingJobFlags}))
	submitted := time.Now()
	waitForJob(t, uid, "PENDING", 2*time.Minute)

	waitForTunnelEvent(t, 3*time.Minute, ns, "notebook", "TunnelWaitingForNode", "reason BeginTime, expected start ")
	var start string
	waitFor(t, time.Minute, "the Tunnel to hold Slurm's reason and expected start", func() error {
		got := kubectl(t, "", "get", "tunnel", "notebook", "-n", ns, "-o", "jsonpath={.status.waitReason} {.status.expectedStart}")
		reason, at, _ := strings.Cut(got, " ")
		if reason != "BeginTime" {
			return fmt.Errorf("the Tunnel says %q", got)
		}
		start = at
		return nil
	})
	expected, err := time.Parse(time.RFC3339, start)
	if want := submitted.Add(time.Hour); err != nil || expected.Before(want.Add(-10*time.Minute)) || expected.After(want.Add(10*time.Minute)) {
		t.Errorf("expected start %q (%v), want about %s, the job's --begin", start, err, want.UTC().Format(time.RFC3339))
	}
	if describe := kubectl(t, "", "describe", "pod", "notebook", "-n", ns); !strings.Contains(describe, "reason BeginTime, expected start "+start) {
		t.Errorf("kubectl describe pod does not show Slurm's reason and expected start %s:\n%s", start, describe)
	}
	if table, _ := shadowgateStatus(t, user, "-n", ns); !strings.Contains(table, "WaitingForNode (Slurm: BeginTime, expected start "+start+")") {
		t.Errorf("kubectl shadowgate status does not show Slurm's reason and expected start %s:\n%s", start, table)
	}

	id, err := site.local.HPC.Slurm("squeue", "-h", "--name="+uid, "-o", "%i").Output()
	if err != nil {
		t.Fatalf("squeue: %v", err)
	}
	if out, err := site.local.HPC.Slurm("scontrol", "update", "jobid="+strings.TrimSpace(string(id)), "starttime=now").CombinedOutput(); err != nil {
		t.Fatalf("scontrol update starttime=now: %v %s", err, out)
	}
	waitForJob(t, uid, "RUNNING", 2*time.Minute)
	s.readyPod(t, 3*time.Minute)
	waitFor(t, time.Minute, "kubectl shadowgate status -A -w to show the tunnel WaitingForNode, then Ready", func() error {
		var waiting bool
		for _, line := range strings.Split(watch.String(), "\n") {
			f := strings.Fields(line)
			if len(f) < 6 || f[0] != ns || f[1] != "notebook" {
				continue
			}
			switch {
			case f[5] == "WaitingForNode" && strings.Contains(line, "Slurm: BeginTime"):
				waiting = true
			case f[5] == "Ready" && waiting:
				return nil
			}
		}
		return fmt.Errorf("it printed:\n%s", watch.String())
	})
}

// statusWatch runs kubectl shadowgate status with args as the cluster admin, kubectl finding
// the plugin on PATH as kubectl-shadowgate, until the test ends; what it prints is returned.
func statusWatch(t *testing.T, args ...string) *syncbuf.Buffer {
	t.Helper()
	plugins := t.TempDir()
	if err := os.Symlink(site.bin, filepath.Join(plugins, "kubectl-shadowgate")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncbuf.Buffer{}
	// kubectl takes no flags before a plugin's name: the kubeconfig comes from the environment.
	cmd := exec.CommandContext(ctx, site.kubectl.Path, append([]string{"shadowgate", "status"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+site.kubectl.Kubeconfig, "PATH="+plugins+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl shadowgate status %s: %v", strings.Join(args, " "), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return out
}
