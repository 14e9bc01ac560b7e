package certmanager

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// certManager is the cert-manager build hack/build-cert-manager.sh makes: the binary that runs
// the upstream controllers and cainjector, and the CRDs of the same version.
type certManager struct {
	Bin, CRDs string
}

// buildCertManager runs hack/build-cert-manager.sh: minutes on a fresh machine, then cached
// in bin/. `make test` runs it before `go test`, so the test timeout does not pay for it.
func buildCertManager(t *testing.T, root string) certManager {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "build-cert-manager.sh"))
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("building cert-manager with hack/build-cert-manager.sh: %v", err)
	}
	paths := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if name, path, ok := strings.Cut(sc.Text(), "="); ok {
			paths[name] = path
		}
	}
	cm := certManager{Bin: paths["cert-manager"], CRDs: paths["cert-manager-crds"]}
	for name, p := range map[string]string{"cert-manager": cm.Bin, "cert-manager-crds": cm.CRDs} {
		if _, err := os.Stat(p); p == "" || err != nil {
			t.Fatalf("hack/build-cert-manager.sh named no usable %s (%q); it printed:\n%s", name, p, out)
		}
	}
	return cm
}

// startCertManager runs the cert-manager binary against the cluster of kubeconfig, its
// output in log. The context it returns ends when cert-manager exits, so a wait on its work
// fails at once rather than at its timeout. The cleanup stops it with SIGTERM and fails the
// test unless it exits cleanly, as a controller that hangs or crashes on shutdown would.
func startCertManager(ctx context.Context, t *testing.T, bin, kubeconfig, log string) context.Context {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "-v=2")
	cmd.Stdout, cmd.Stderr = f, f
	// It dies with the test binary even when that is killed without running cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting cert-manager: %v", err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		err := cmd.Wait()
		f.Close()
		cancel(fmt.Errorf("cert-manager exited: %v", err))
		done <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("cert-manager did not exit cleanly on SIGTERM: %v; see %s", err, log)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("cert-manager did not stop within 30s of SIGTERM; see %s", log)
		}
	})
	return ctx
}

// tail is the end of a log file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return fmt.Sprintf("the end of %s:\n%s", path, strings.Join(lines[max(0, len(lines)-n):], "\n"))
}
