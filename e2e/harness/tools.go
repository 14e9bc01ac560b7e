// Package harness runs a real control plane on loopback for the e2e suite and `make dev`:
// etcd and kube-apiserver built from the Go module proxy (hack/e2e-tools.sh), the real
// kubectl, and `shadowgate serve` installed from the manifests/ dev overlay or from the Helm
// chart's rendering (helm built by hack/build-helm.sh).
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
	// KubeControllerManager and KubeScheduler run only on the local site (StartCluster).
	KubeControllerManager, KubeScheduler string
}

// BuildTools runs hack/e2e-tools.sh in the repository at root: it builds what bin/ lacks
// (minutes on a fresh machine) and names each binary. Its progress goes to progress.
func BuildTools(root string, progress *os.File) (Tools, error) {
	paths, err := runBuildScript(root, "e2e-tools.sh", progress,
		"etcd", "kube-apiserver", "kubectl", "kube-controller-manager", "kube-scheduler")
	if err != nil {
		return Tools{}, err
	}
	return Tools{Etcd: paths["etcd"], KubeAPIServer: paths["kube-apiserver"], Kubectl: paths["kubectl"],
		KubeControllerManager: paths["kube-controller-manager"], KubeScheduler: paths["kube-scheduler"]}, nil
}

// BuildHelm runs hack/build-helm.sh in the repository at root, which builds helm into bin/
// unless it is there already, and returns its path.
func BuildHelm(root string, progress *os.File) (string, error) {
	paths, err := runBuildScript(root, "build-helm.sh", progress, "helm")
	return paths["helm"], err
}

// runBuildScript runs a hack/ script that builds tools and prints NAME=PATH for each, and
// returns the paths of the names wanted, each checked to exist.
func runBuildScript(root, script string, progress *os.File, want ...string) (map[string]string, error) {
	return runBuildScriptEnv(root, script, nil, progress, want...)
}

// runBuildScriptEnv is runBuildScript with env added to the script's environment.
func runBuildScriptEnv(root, script string, env []string, progress *os.File, want ...string) (map[string]string, error) {
	return runBuildScriptArgs(root, script, nil, env, progress, want...)
}

// runBuildScriptArgs is runBuildScriptEnv with args given to the script.
func runBuildScriptArgs(root, script string, args, env []string, progress *os.File, want ...string) (map[string]string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", script), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = root
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("building with hack/%s: %w", script, err)
	}
	paths := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if name, path, ok := strings.Cut(sc.Text(), "="); ok {
			paths[name] = path
		}
	}
	for _, name := range want {
		if paths[name] == "" {
			return nil, fmt.Errorf("hack/%s named no %s binary; it printed:\n%s", script, name, out)
		}
		if _, err := os.Stat(paths[name]); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return paths, nil
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

// BuildTraefik runs hack/build-traefik.sh in the repository at root, which builds Traefik, the
// local site's ingress controller, into bin/ unless it is there (minutes on a fresh machine),
// and returns its path.
func BuildTraefik(root string, progress *os.File) (string, error) {
	paths, err := runBuildScript(root, "build-traefik.sh", progress, "traefik")
	if err != nil {
		return "", err
	}
	return paths["traefik"], nil
}
