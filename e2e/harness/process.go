package harness

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/interlink-hq/shadowgate/internal/freeport"
)

// process is a child process whose output goes to a log file, stopped with SIGTERM.
type process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set when done is closed
	// stoppedExit, when not 0, is the exit code with which the process reports a clean stop
	// on SIGTERM (kube-scheduler without leader election exits 1, "finished without leader
	// elect").
	stoppedExit int
	stopping    bool
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	// Appended to: a process restarted by a test (kube-apiserver, serve) keeps one log.
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Children die with the test binary even when it is killed without a chance to stop them,
	// and sit in a process group of their own, so the Ctrl-C a terminal sends to `make dev`
	// reaches the runner alone, which then stops them in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exitedErr returns an error naming the process and the end of its log when it has exited.
func (p *process) exitedErr() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.name, p.err, p.log, p.tail(40))
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to timeout, then kills. It returns the exit error of a
// process that did not stop cleanly.
func (p *process) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	p.stopping = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have exited meanwhile; Wait says how
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed", p.name, timeout)
	}
}

// kill sends SIGKILL, as a crash or the OOM killer ends a process, and waits for it to exit.
func (p *process) kill() {
	_ = p.cmd.Process.Kill() // it may have exited meanwhile
	<-p.done
}

func (p *process) exitErr() error {
	var exit *exec.ExitError
	if errors.As(p.err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() {
		return nil // etcd and kube-apiserver may end on the signal itself
	}
	if errors.As(p.err, &exit) && p.stopping && p.stoppedExit != 0 && exit.ExitCode() == p.stoppedExit {
		return nil
	}
	if p.err != nil {
		return fmt.Errorf("%s: %w; the end of %s:\n%s", p.name, p.err, p.log, p.tail(20))
	}
	return nil
}

func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// freePort returns a loopback port nothing listens on right now and that no other harness
// process in this test binary was given.
func freePort() (int, error) { return freeport.Port("127.0.0.1") }

// poll calls ready every 100ms until it returns nil, p exits, or timeout passes.
func poll(p *process, timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if exited := p.exitedErr(); exited != nil {
			return exited
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v; the end of %s:\n%s", p.name, timeout, err, p.log, p.tail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Process is a child process started with StartProcess: a tool a test runs beside the control
// plane, such as cert-manager.
type Process struct{ p *process }

// StartProcess starts bin with args, its output in logPath. Like etcd, it dies with the test
// binary.
func StartProcess(name, logPath, bin string, args ...string) (*Process, error) {
	p, err := startProcess(name, logPath, bin, args...)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Stop sends SIGTERM, waits up to 30s, then kills; it reports a process that did not exit
// cleanly, with the end of its log.
func (p *Process) Stop() error { return p.p.stop(30 * time.Second) }

// Tail is the last n lines of the process's log, for failure messages.
func (p *Process) Tail(n int) string { return p.p.tail(n) }

// getOK GETs url with hc and wants 200: a poll check of a daemon's health endpoint.
func getOK(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
