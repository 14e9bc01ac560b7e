package inject

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/internal/slurmconf"
	"github.com/interlink-hq/shadowgate/internal/sshtest"
)

// slurmNode is the name of the one node of the test cluster; slurmd is told it, so it does
// not depend on the machine's hostname.
const slurmNode = "sgnode"

// slurm is a real single-node Slurm (Debian's slurm-wlm): munged, slurmctld and slurmd on
// this machine, the node at a compute node address, with their configuration, state and logs
// in a directory of the test's.
type slurm struct {
	conf     string // SLURM_CONF for every client
	dir      string
	nodeAddr string // the node's NodeAddr, a compute node address (slurmd listens on all)
}

func startSlurm(t testing.TB) *slurm {
	t.Helper()
	sshtest.Require(t, "munged", "slurmctld", "slurmd", "sbatch", "squeue", "srun", "scancel", "sinfo")
	root := account{name: "root", home: "/root"}
	s := &slurm{dir: sharedDir(t), nodeAddr: sshtest.NodeAddress(t)}
	secret := make([]byte, 1024)
	_, _ = rand.Read(secret)
	key := filepath.Join(t.TempDir(), "munge.key") // munged wants it private to root
	if err := os.WriteFile(key, secret, 0o400); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(s.dir, "munge.sock")
	startAs(t, root, nil, "munged", "-F", "-f", "--key-file="+key, "--socket="+socket,
		"--pid-file="+filepath.Join(s.dir, "munged.pid"), "--seed-file="+filepath.Join(t.TempDir(), "seed"),
		"--log-file="+filepath.Join(s.dir, "munged.log"))
	eventually(t, 10*time.Second, func() error { _, err := os.Stat(socket); return err })

	for _, d := range []string{"state", "spool"} {
		if err := os.Mkdir(filepath.Join(s.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.conf = filepath.Join(s.dir, "slurm.conf")
	conf := slurmconf.Cluster{Name: "shadowgate", Controller: "127.0.0.1",
		CtldPort: sshtest.FreePort(t, "0.0.0.0"), SlurmdPort: sshtest.FreePort(t, "0.0.0.0"),
		MungeSocket: socket, Dir: s.dir, Node: slurmNode, NodeAddr: s.nodeAddr}.Render()
	if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"SLURM_CONF=" + s.conf}
	// Registered before the daemons, so it runs after they stop: what they logged, written.
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"slurmctld.log", "slurmd.log"} {
				data, err := os.ReadFile(filepath.Join(s.dir, name))
				t.Logf("%s (%v):\n%s", name, err, data)
			}
		}
	})
	startAs(t, root, env, "slurmctld", "-D", "-i")
	startAs(t, root, env, "slurmd", "-D", "-N", slurmNode)
	eventually(t, 20*time.Second, func() error {
		out, err := s.command("sinfo", "-h", "-n", slurmNode, "-o", "%t").CombinedOutput()
		if state := strings.TrimSpace(string(out)); err != nil || state != "idle" {
			// slurmd may not have opened its log yet: say so, and try again.
			log, readErr := os.ReadFile(filepath.Join(s.dir, "slurmd.log"))
			if readErr != nil {
				log = []byte(readErr.Error())
			}
			return fmt.Errorf("slurm node %s is %q (%v); slurmd log:\n%s", slurmNode, state, err, log)
		}
		return nil
	})
	return s
}

func (s *slurm) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+s.conf)
	return cmd
}

// slurmJob is a batch job running the pod's pre-exec, as the plugin would submit it.
type slurmJob struct {
	id, out string
	s       *slurm
}

// await waits, a minute at most, until squeue prints want for the job in format (%T its
// state, %r why it waits), whatever state the job is in.
func (j *slurmJob) await(t *testing.T, format, want string) {
	t.Helper()
	eventually(t, 60*time.Second, func() error {
		out, _ := j.s.command("squeue", "-h", "--states=all", "-j", j.id, "-o", format).Output()
		if got := strings.TrimSpace(string(out)); got != want {
			return fmt.Errorf("squeue -o %s says %q of job %s, not %q yet", format, got, j.id, want)
		}
		return nil
	})
}

// submit runs script as acct's batch job named name, cancelled when the test ends; sbatchArgs
// (such as --hold) go to sbatch before the script. Each job has a script and an output file of
// its own, also beside another job of the same name.
func (s *slurm) submit(t testing.TB, acct account, name, script string, env []string, sbatchArgs ...string) *slurmJob {
	t.Helper()
	f, err := os.CreateTemp(s.dir, name+".*.sh")
	if err != nil {
		t.Fatal(err)
	}
	file := f.Name()
	f.Close()
	writeExecutable(t, file, "#!/bin/sh\n"+script)
	if err := os.Chmod(file, 0o755); err != nil {
		t.Fatal(err)
	}
	j := &slurmJob{out: strings.TrimSuffix(file, ".sh") + ".out", s: s}
	args := append(append([]string{"--parsable", "--job-name=" + name, "--output=" + j.out}, sbatchArgs...), file)
	cmd := s.command("sbatch", args...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: acct.uid, Gid: acct.gid}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	j.id = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("batch job %s:\n%s", j.id, j.output())
		}
		_ = s.command("scancel", j.id).Run()
		// The daemons stop after this; the job's processes must not outlive them.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && j.running(); {
			time.Sleep(100 * time.Millisecond)
		}
	})
	return j
}

func (j *slurmJob) output() string {
	data, _ := os.ReadFile(j.out)
	return string(data)
}

func (j *slurmJob) running() bool {
	out, err := j.s.command("squeue", "-h", "-j", j.id, "-o", "%T").Output()
	state := strings.TrimSpace(string(out))
	return err == nil && (state == "RUNNING" || state == "PENDING" || state == "CONFIGURING" || state == "COMPLETING")
}

func writeExecutable(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}
