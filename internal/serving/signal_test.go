package serving

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// drainHelperEnv makes the test binary run drainHelper instead of the tests: a process of its
// own, which a signal's default action may end without ending the tests.
const drainHelperEnv = "SHADOWGATE_TEST_DRAIN_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(drainHelperEnv) != "" {
		drainHelper()
	}
	os.Exit(m.Run())
}

// drainHelper catches signals as serve does, drains for a minute on the first and exits 0
// when the drain is over; it prints "ready" once the signals are caught, and the drain's log.
func drainHelper() {
	signalled, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	log := funcr.New(func(prefix, args string) { fmt.Println(prefix, args) }, funcr.Options{})
	ctx := DrainThenStop(signalled, stop, &DrainingServer{Server: ctrlwebhook.NewServer(ctrlwebhook.Options{})}, time.Minute, log)
	fmt.Println("ready")
	<-ctx.Done()
	os.Exit(0)
}

// A second signal during the drain is not swallowed: Ctrl-C after SIGTERM ends the process at
// once, by the signal's default action, instead of a minute later.
func TestASecondSignalDuringTheDrainEndsTheProcessAtOnce(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), drainHelperEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever fails below, the helper does not outlive the test.
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := make(chan error, 1)
	lines := bufio.NewScanner(out)
	await := func(what string) {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), what) {
				return
			}
		}
		t.Fatalf("the helper ended its output without %q", what)
	}
	await("ready")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("draining") // logged once the signals are no longer caught
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
			t.Errorf("want the process ended by SIGINT, got %v", err)
		}
	case <-time.After(20 * time.Second): // the drain lasts a minute
		_ = cmd.Process.Kill()
		<-exited
		t.Error("the second signal was swallowed: the process still ran 20 s after it")
	}
}
