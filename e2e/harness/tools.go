// Package harness runs a real control plane on loopback for the e2e suite and `make dev`:
// etcd and kube-apiserver built from the Go module proxy (hack/e2e-tools.sh), the real
// kubectl, and `shadowgate serve` installed from the manifests/ dev overlay.
package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Tools are the paths of the built control-plane binaries.
type Tools struct {
	Etcd, KubeAPIServer, Kubectl string
}

// BuildTools runs hack/e2e-tools.sh in the repository at root: it builds what bin/ lacks
// (minutes on a fresh machine) and names each binary. Its progress goes to progress.
func BuildTools(root string, progress *os.File) (Tools, error) {
	cmd := exec.Command(filepath.Join(root, "hack", "e2e-tools.sh"))
	cmd.Dir = root
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		return Tools{}, fmt.Errorf("building the control plane with hack/e2e-tools.sh: %w", err)
	}
	paths := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if name, path, ok := strings.Cut(sc.Text(), "="); ok {
			paths[name] = path
		}
	}
	t := Tools{Etcd: paths["etcd"], KubeAPIServer: paths["kube-apiserver"], Kubectl: paths["kubectl"]}
	for name, p := range map[string]string{"etcd": t.Etcd, "kube-apiserver": t.KubeAPIServer, "kubectl": t.Kubectl} {
		if p == "" {
			return Tools{}, fmt.Errorf("hack/e2e-tools.sh named no %s binary; it printed:\n%s", name, out)
		}
		if _, err := os.Stat(p); err != nil {
			return Tools{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return t, nil
}

// BuildShadowgate builds cmd/shadowgate of the repository at root into dir.
func BuildShadowgate(root, dir string) (string, error) {
	bin := filepath.Join(dir, "shadowgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/shadowgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building shadowgate: %w\n%s", err, out)
	}
	return bin, nil
}
