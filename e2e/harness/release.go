package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// startRegistry starts distribution's registry (bin) on a free loopback port, its
// configuration and storage in dir, and waits for its API to answer. It returns the process
// and the registry's host:port.
func startRegistry(bin, dir, logPath string) (*process, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
`, filepath.Join(dir, "data"), addr, token())), 0o644); err != nil {
		return nil, "", err
	}
	p, err := startProcess("registry", logPath, bin, "serve", config)
	if err != nil {
		return nil, "", err
	}
	if err := poll(p, 30*time.Second, func() error { return getOK(http.DefaultClient, "http://"+addr+"/v2/") }); err != nil {
		p.kill()
		return nil, "", err
	}
	return p, addr, nil
}

// Registry is distribution's registry on loopback, started by StartRegistry.
type Registry struct {
	// Addr is its host:port; it is spoken to over plain HTTP.
	Addr string
	p    *process
}

// StartRegistry builds distribution's registry of the repository at root (hack/node-tools.sh
// registry) unless bin/ has it, and starts it on a free loopback port, its storage in dir.
func StartRegistry(root, dir string, progress *os.File) (*Registry, error) {
	paths, err := runBuildScriptArgs(root, "node-tools.sh", []string{"registry"}, nil, progress, "registry")
	if err != nil {
		return nil, err
	}
	p, addr, err := startRegistry(paths["registry"], dir, filepath.Join(dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	return &Registry{Addr: addr, p: p}, nil
}

// Stop stops the registry.
func (r *Registry) Stop() error { return r.p.stop(30 * time.Second) }

// Release is what hack/release.sh published, as its release.env names it.
type Release struct {
	// Dist is the directory of the release's files: the CLI's archives, SBOMs, the chart's
	// archive, checksums.txt and its signature, cosign.pub.
	Dist string
	// Version is the release's version (semver, no leading v): the webhook image's tag and
	// the chart's version and appVersion.
	Version string
	// Registry is where it was pushed: host:port/path.
	Registry string
	// WebhookImage is the webhook's image index, <Registry>/shadowgate@sha256:...;
	// WebhookImages its image for each platform ("linux/amd64", "linux/arm64").
	WebhookImage  string
	WebhookImages map[string]string
	// ShadowImage is the shadow image, <Registry>/shadowgate/shadow@sha256:....
	ShadowImage string
	// Chart is the chart's repository, oci://<Registry>/charts/shadowgate, for helm install
	// --version Version; ChartArtifact the chart by digest; ChartFile its archive's name in
	// Dist.
	Chart, ChartArtifact, ChartFile string
	// PublicKey verifies the release's signatures (cosign.pub in Dist).
	PublicKey string
}

// RunRelease runs hack/release.sh of the repository at root (as root: it builds the images with
// buildah), pushing into registry (host:port/path; a loopback registry is spoken to over plain
// HTTP) with a throwaway signing key, its files into dist. Its progress goes to progress.
// Images already built for the commit are reused; the rest takes minutes the first time.
func RunRelease(ctx context.Context, root, registry, dist string, progress *os.File) (*Release, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "release.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "REGISTRY="+registry, "DIST="+dist, "SIGNING_KEY=", "VERSION=")
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("hack/release.sh into %s: %w", registry, err)
	}
	v := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), "="); ok {
			v[name] = value
		}
	}
	r := &Release{Dist: dist, Version: v["version"], Registry: v["registry"], WebhookImage: v["webhook-image"],
		WebhookImages: map[string]string{"linux/amd64": v["webhook-image-linux-amd64"], "linux/arm64": v["webhook-image-linux-arm64"]},
		ShadowImage:   v["shadow-image"], Chart: v["chart"], ChartArtifact: v["chart-artifact"], ChartFile: v["chart-file"],
		PublicKey: v["public-key"]}
	for name, value := range map[string]string{"version": r.Version, "webhook-image": r.WebhookImage,
		"webhook-image-linux-amd64": r.WebhookImages["linux/amd64"], "webhook-image-linux-arm64": r.WebhookImages["linux/arm64"],
		"shadow-image": r.ShadowImage, "chart": r.Chart, "chart-artifact": r.ChartArtifact, "chart-file": r.ChartFile,
		"public-key": r.PublicKey} {
		if value == "" {
			return nil, fmt.Errorf("hack/release.sh printed no %s=; it printed:\n%s", name, out)
		}
	}
	return r, nil
}

// Release runs hack/release.sh (as RunRelease) into the node's registry under interlink-hq/, so
// the node pulls the released images as a site's node pulls them from its registry: by the
// names and digests the released chart renders (rel.Chart, installed with helm's --plain-http).
func (n *Node) Release(ctx context.Context, root, dist string, progress *os.File) (*Release, error) {
	return RunRelease(ctx, root, n.Registry+"/interlink-hq", dist, progress)
}

// VerifyRelease runs `hack/release.sh verify` on the release's files with the public key key:
// checksums, and the signatures of the checksums, images, SBOM attestations and chart. Its
// error holds the script's output.
func VerifyRelease(ctx context.Context, root, dist, key string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "release.sh"), "verify")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DIST="+dist, "KEY="+key)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/release.sh verify with %s: %w\n%s", key, err, out)
	}
	return nil
}
