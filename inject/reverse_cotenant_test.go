package inject

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Every pod of a virtual node runs its job as one site account, so a co-tenant can name a job
// of its own after another pod's UID and run it while that pod's job waits in the queue. The
// srun carrier picks the job as node discovery does: it steps into neither, and says why; once
// only the pod's job is left, the tunnel comes up in it.
func TestReverseSrunStepsIntoNoCoTenantsJobOfThePodsName(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSrun})
	// The pod's job, queued (held) as the plugin submitted it.
	job := s.slurm.submit(t, s.job, jobUID, s.jobScript(), s.jobEnv(), "--hold")
	// The co-tenant's job, named after the pod's UID and running the pod's pre-exec, so a
	// carrier that stepped into it would find a relay for the pod's bind address there and
	// carry the pod's forwards into it.
	cotenantRoot := sharedDir(t)
	cotenant := s.slurm.submit(t, s.job, jobUID, s.jobScript(), s.jobEnv("INTERLINK_SOCKET_DIR_ROOT="+cotenantRoot, "SHADOW_REVERSE_WAIT=600"))
	cotenantDir := filepath.Join(cotenantRoot, "il-rev-"+s.bind)
	eventually(t, 45*time.Second, func() error {
		if _, err := os.Stat(cotenantDir); err != nil || !cotenant.running() {
			return fmt.Errorf("the co-tenant's job %s has no relay yet (%v):\n%s", cotenant.id, err, cotenant.output())
		}
		return nil
	})

	shadow := s.startShadow(t)
	want := []string{"status: DuplicateJobName: srun from " + s.login.Host + " steps into no job for " + slurmNode +
		": refusing Slurm's answer on " + s.login.Host + " for job " + jobUID + ": 1 running job(s) and PENDING waiting have that name (job ids ",
		job.id, cotenant.id}
	eventually(t, 60*time.Second, func() error {
		out := shadow.out.String()
		for _, w := range want {
			if !strings.Contains(out, w) {
				return fmt.Errorf("the shadow's log lacks %q:\n%s", w, out)
			}
		}
		return nil
	})
	if out := shadow.out.String(); strings.Contains(out, "reverse tunnel up") {
		t.Errorf("the shadow brought the reverse tunnel up beside a co-tenant's job of the pod's name:\n%s", out)
	}
	sockets, _ := filepath.Glob(filepath.Join(cotenantDir, "rev-*.sock"))
	if len(sockets) > 0 {
		t.Errorf("the pod's forwards reached the co-tenant's job: %v", sockets)
	}

	// The co-tenant's job goes and the pod's runs: the tunnel comes up in the pod's job.
	if out, err := s.slurm.command("scancel", cotenant.id).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, func() error {
		if cotenant.running() {
			return fmt.Errorf("the co-tenant's job %s has not ended", cotenant.id)
		}
		return nil
	})
	if out, err := s.slurm.command("scontrol", "release", job.id).CombinedOutput(); err != nil {
		t.Fatalf("scontrol release: %v\n%s", err, out)
	}
	s.waitReady(t, job)
	s.expectEcho(t)
	if _, err := os.Stat(s.socket(s.listen)); err != nil {
		t.Errorf("the pod's job has no socket for its forward: %v", err)
	}
}
