package inject

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// These tests take parts of a running reverse tunnel away and check that the session notices
// and the tunnel comes back, or that a job does not take another job's tunnel down.

// expectEcho waits until the job's user gets the echo through the tunnel.
func (s *reverseSite) expectEcho(t *testing.T) {
	t.Helper()
	addr := net.JoinHostPort(s.bind, strconv.Itoa(s.listen))
	eventually(t, 30*time.Second, func() error {
		if got := dialAs(t, s.job, "TCP4:"+addr); got != "ping\n" {
			return fmt.Errorf("the job's user got %q through %s, want the echo", got, addr)
		}
		return nil
	})
}

// sessionEnds waits until the shadow has logged the end of a session more times than before.
func (s *reverseSite) sessionEnds(t *testing.T, shadow *process, before int) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		if strings.Count(shadow.out.String(), s.sessionEnded()) <= before {
			return fmt.Errorf("the shadow has not seen its session end")
		}
		return nil
	})
}

func (s *reverseSite) sessionEnded() string {
	return "the reverse tunnel session on " + s.nodeName + " ended"
}

func TestReverseTunnelSessionEndsWhenOneOfItsSocketsGoes(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	job, shadow := s.startTunnel(t)
	s.expectEcho(t)
	// The node's sshd does not bind a socket again once it is gone: only a new session does.
	if err := os.Remove(s.socket(s.listen)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.socket(s.second)); err != nil {
		t.Fatalf("the other socket went too: %v", err)
	}
	s.sessionEnds(t, shadow, 0)
	s.expectEcho(t)
	if !job.running() {
		t.Errorf("the job ended:\n%s", job.out)
	}
}

// A job requeued onto the same node gets a socket directory under the same path as the one
// before. The old session's sockets went with the old directory, so it must end and make way
// for one that binds them in the new directory.
func TestReverseTunnelSessionEndsWhenTheDirectoryIsRecreated(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	first, shadow := s.startTunnel(t)
	s.expectEcho(t)
	// Gone at once, as when Slurm kills a job: its relay leaves the directory behind, and the
	// session holds its sockets there.
	if err := syscall.Kill(-first.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	if _, err := os.Stat(s.socket(s.listen)); err != nil {
		t.Fatalf("the killed job's socket directory is not there to be reused: %v", err)
	}

	requeued := s.startJob(t)
	s.sessionEnds(t, shadow, 0)
	s.waitReady(t, requeued)
	s.expectEcho(t)
}

// Two jobs of one user with the same bind address (replicas of a template that sets it) would
// share a socket directory: the second stops, and the first keeps its tunnel.
func TestReverseTunnelSecondJobWithTheSameBindStops(t *testing.T) {
	t.Parallel()
	s := newReverseSite(t, reverseOptions{sshd: policy.SshdNode, nodeExec: policy.NodeExecSSH})
	_, shadow := s.startTunnel(t)
	s.expectEcho(t)

	second := s.startJob(t)
	second.expectFailure(t, 10*time.Second, "the second job went on", "another job of yours holds "+s.bind)
	if strings.Contains(shadow.out.String(), s.sessionEnded()) {
		t.Errorf("the first job's session ended")
	}
	s.expectEcho(t)
}
