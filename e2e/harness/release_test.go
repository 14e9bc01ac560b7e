package harness

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The release, pushed into distribution's registry on loopback, as a site consumes it: images
// by digest for each platform, the CLI and its checksums, SBOMs, the chart from the registry,
// and signatures that verify with the release's public key and with no other, nor over a
// tampered artifact.
func TestAReleaseIsPublishedAsASiteConsumesIt(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs hack/release.sh, which builds the images with buildah and debootstrap as root and pushes them into a loopback registry")
	}
	if os.Geteuid() != 0 {
		t.Fatal("hack/release.sh builds the images with buildah and debootstrap, which need root: run the test as root")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	reg, err := StartRegistry(root, filepath.Join(dir, "registry"), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := reg.Stop(); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	rel, err := RunRelease(ctx, root, reg.Addr+"/interlink-hq", filepath.Join(dir, "dist"), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("released %s into %s in %s", rel.Version, rel.Registry, time.Since(start).Round(time.Second))
	helm, err := BuildHelm(root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the webhook image pulls by digest for linux/amd64 and linux/arm64, the shadow image for linux/amd64", func(t *testing.T) {
		index := manifest(t, rel.WebhookImage)
		var listed []string
		for _, m := range index.Manifests {
			platform := m.Platform.OS + "/" + m.Platform.Architecture
			listed = append(listed, platform)
			if want := rel.WebhookImages[platform]; !strings.HasSuffix(want, "@"+m.Digest) {
				t.Errorf("the index lists %s for %s; the release names %s", m.Digest, platform, want)
			}
		}
		if slices.Sort(listed); !slices.Equal(listed, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("the index lists the platforms %v, want linux/amd64 and linux/arm64", listed)
		}
		for platform, ref := range rel.WebhookImages {
			pullable(t, ref, platform)
		}
		pullable(t, rel.ShadowImage, "linux/amd64")
	})

	t.Run("the CLI's archives match checksums.txt and run", func(t *testing.T) {
		sums, err := os.ReadFile(filepath.Join(rel.Dist, "checksums.txt"))
		if err != nil {
			t.Fatal(err)
		}
		named := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
			sum, file, ok := strings.Cut(line, "  ")
			if !ok {
				t.Fatalf("checksums.txt line %q is not sha256sum's", line)
			}
			named[file] = true
			if got := sha256File(t, filepath.Join(rel.Dist, file)); got != sum {
				t.Errorf("%s: sha256 %s, checksums.txt says %s", file, got, sum)
			}
		}
		krew, err := os.ReadFile(filepath.Join(rel.Dist, "shadowgate.krew.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, platform := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
			archive := "kubectl-shadowgate_v" + rel.Version + "_" + platform + ".tar.gz"
			for _, file := range []string{archive, strings.TrimSuffix(archive, ".tar.gz") + ".spdx.json"} {
				if !named[file] {
					t.Errorf("checksums.txt does not name %s: %s", file, sums)
				}
			}
			for _, want := range []string{"/v" + rel.Version + "/" + archive + "\n", "sha256: " + sha256File(t, filepath.Join(rel.Dist, archive)) + "\n"} {
				if !strings.Contains(string(krew), want) {
					t.Errorf("the krew manifest does not name %q:\n%s", want, krew)
				}
			}
		}
		for _, file := range []string{rel.ChartFile, "shadowgate-chart_" + rel.Version + ".spdx.json", "shadowgate.krew.yaml"} {
			if !named[file] {
				t.Errorf("checksums.txt does not name %s", file)
			}
		}
		bin := extract(t, filepath.Join(rel.Dist, "kubectl-shadowgate_v"+rel.Version+"_linux_amd64.tar.gz"), "kubectl-shadowgate", t.TempDir())
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), rel.Version) {
			t.Errorf("shadowgate version: %v, %q; want it to report %s", err, out, rel.Version)
		}
	})

	t.Run("each SBOM is SPDX naming the Go modules, Debian packages and the chart's image by digest", func(t *testing.T) {
		module := "pkg:golang/github.com/interlink-hq/shadowgate@" + rel.Version
		repo, digest, _ := strings.Cut(rel.WebhookImage, "@")
		webhookImage := "pkg:oci/shadowgate@" + strings.Replace(digest, ":", "%3A", 1) + "?repository_url=" + repo + "&tag=" + rel.Version
		for file, want := range map[string][]string{
			"kubectl-shadowgate_v" + rel.Version + "_darwin_arm64.spdx.json": {module, "pkg:golang/k8s.io/client-go@", "pkg:golang/stdlib@go"},
			"shadowgate-image_" + rel.Version + "_linux_arm64.spdx.json":     {module, "pkg:golang/sigs.k8s.io/controller-runtime@"},
			"shadow-image_0.1.0_linux_amd64.spdx.json":                       {"pkg:deb/debian/openssh-client@", "pkg:deb/debian/socat@", "pkg:deb/debian/tini@", "pkg:deb/debian/libc6@"},
			"shadowgate-chart_" + rel.Version + ".spdx.json":                 {webhookImage},
		} {
			got := spdxPURLs(t, filepath.Join(rel.Dist, file))
			for _, w := range want {
				if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, w) }) {
					t.Errorf("%s names no package %s*", file, w)
				}
			}
		}
	})

	t.Run("the chart pulls from the registry and renders the released images", func(t *testing.T) {
		pulled := t.TempDir()
		if out, err := exec.Command(helm, "pull", rel.Chart, "--version", rel.Version, "--plain-http", "--destination", pulled).CombinedOutput(); err != nil {
			t.Fatalf("helm pull %s: %v\n%s", rel.Chart, err, out)
		}
		out, err := exec.Command(helm, "template", "shadowgate", filepath.Join(pulled, rel.ChartFile), "--namespace", "shadowgate-system").CombinedOutput()
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		repo, digest, _ := strings.Cut(rel.WebhookImage, "@")
		for _, want := range []string{
			fmt.Sprintf("image: %q", repo+":"+rel.Version+"@"+digest),
			strings.TrimSuffix(strings.SplitN(rel.ShadowImage, "@", 2)[0], "/shadow") + "/shadow:",
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("the released chart renders no %s", want)
			}
		}
	})

	t.Run("the signatures verify with the release's key and not with another, nor over a tampered artifact", func(t *testing.T) {
		if err := VerifyRelease(ctx, root, rel.Dist, rel.PublicKey); err != nil {
			t.Fatal(err)
		}
		other := t.TempDir()
		cosign, err := runBuildScript(root, "build-cosign.sh", os.Stderr, "cosign")
		if err != nil {
			t.Fatal(err)
		}
		gen := exec.Command(cosign["cosign"], "generate-key-pair", "--output-key-prefix", filepath.Join(other, "other"))
		gen.Env = append(os.Environ(), "COSIGN_PASSWORD=")
		if out, err := gen.CombinedOutput(); err != nil {
			t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
		}
		if err := VerifyRelease(ctx, root, rel.Dist, filepath.Join(other, "other.pub")); err == nil || !strings.Contains(err.Error(), "does not verify") {
			t.Errorf("verified with another key: %v", err)
		}
		// As a site verifies an image by its name: with the release's key, not another; and an
		// image pushed over the release's tag does not verify.
		verify := func(key, ref string) error {
			out, err := exec.Command(cosign["cosign"], "verify", "--key", key, "--insecure-ignore-tlog",
				"--allow-http-registry", "--allow-insecure-registry", ref).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w\n%s", err, out)
			}
			return nil
		}
		tag := strings.SplitN(rel.WebhookImage, "@", 2)[0] + ":" + rel.Version
		if err := verify(rel.PublicKey, tag); err != nil {
			t.Errorf("cosign verify %s with the release's key: %v", tag, err)
		}
		if err := verify(filepath.Join(other, "other.pub"), tag); err == nil {
			t.Errorf("cosign verify %s with another key passed", tag)
		}
		ociimage, err := runBuildScriptArgs(root, "node-tools.sh", []string{"ociimage"}, nil, os.Stderr, "ociimage")
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(ociimage["ociimage"], "push-binary", ociimage["ociimage"], tag).CombinedOutput(); err != nil {
			t.Fatalf("pushing another image as %s: %v\n%s", tag, err, out)
		}
		if err := verify(rel.PublicKey, tag); err == nil {
			t.Errorf("cosign verify passed for another image pushed as %s", tag)
		}

		// An archive changed, and checksums.txt rewritten to match it: the checksums' signature fails.
		tampered := filepath.Join(t.TempDir(), "dist")
		if out, err := exec.Command("cp", "-a", rel.Dist, tampered).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		archive := "kubectl-shadowgate_v" + rel.Version + "_linux_amd64.tar.gz"
		if err := os.WriteFile(filepath.Join(tampered, archive), []byte("not the release's"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := VerifyRelease(ctx, root, tampered, rel.PublicKey); err == nil || !strings.Contains(err.Error(), "does not match checksums.txt") {
			t.Errorf("verified with %s changed: %v", archive, err)
		}
		sh := exec.Command("sh", "-c", `sha256sum -- *.tar.gz *.spdx.json *.yaml *.tgz >checksums.txt`)
		sh.Dir = tampered
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum: %v\n%s", err, out)
		}
		if err := VerifyRelease(ctx, root, tampered, rel.PublicKey); err == nil || !strings.Contains(err.Error(), "checksums.txt's signature does not verify") {
			t.Errorf("verified with %s changed and checksums.txt rewritten: %v", archive, err)
		}

		// Another chart pushed over the release's version: what helm pulls is not the release's.
		chart := filepath.Join(t.TempDir(), "shadowgate")
		if out, err := exec.Command("sh", "-c", `tar -xzf "$0" -C "$1" && echo "# changed" >>"$1/shadowgate/values.yaml" && "$2" package "$1/shadowgate" --destination "$1/out" && "$2" push "$1/out/$3" "$4" --plain-http`,
			filepath.Join(rel.Dist, rel.ChartFile), filepath.Dir(chart), helm, rel.ChartFile, strings.TrimSuffix(rel.Chart, "/shadowgate")).CombinedOutput(); err != nil {
			t.Fatalf("pushing another chart: %v\n%s", err, out)
		}
		if err := VerifyRelease(ctx, root, rel.Dist, rel.PublicKey); err == nil || !strings.Contains(err.Error(), "pulls is not") {
			t.Errorf("verified with another chart pushed as %s %s: %v", rel.Chart, rel.Version, err)
		}
	})
}

type ociManifest struct {
	MediaType string `json:"mediaType"`
	Config    struct {
		Digest string `json:"digest"`
	} `json:"config"`
	Layers []struct {
		Digest string `json:"digest"`
	} `json:"layers"`
	Manifests []struct {
		Digest   string `json:"digest"`
		Platform struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	} `json:"manifests"`
}

// registryGet GETs (or HEADs) a path of the registry API of ref's registry, for ref's repository,
// and wants 200.
func registryGet(t *testing.T, method, ref, kind, digest string) []byte {
	t.Helper()
	host, repo, _ := strings.Cut(strings.SplitN(ref, "@", 2)[0], "/")
	req, err := http.NewRequest(method, "http://"+host+"/v2/"+repo+"/"+kind+"/"+digest, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s\n%s", method, req.URL, resp.Status, body)
	}
	if method == http.MethodGet && kind == "manifests" {
		if sum := sha256.Sum256(body); "sha256:"+hex.EncodeToString(sum[:]) != digest {
			t.Fatalf("%s: the manifest's digest is not %s", req.URL, digest)
		}
	}
	return body
}

func manifest(t *testing.T, ref string) ociManifest {
	t.Helper()
	_, digest, ok := strings.Cut(ref, "@")
	if !ok {
		t.Fatalf("%s names no digest", ref)
	}
	var m ociManifest
	if err := json.Unmarshal(registryGet(t, http.MethodGet, ref, "manifests", digest), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// pullable checks that ref's manifest, config (for platform) and every layer are in the registry.
func pullable(t *testing.T, ref, platform string) {
	t.Helper()
	m := manifest(t, ref)
	var config struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	}
	if err := json.Unmarshal(registryGet(t, http.MethodGet, ref, "blobs", m.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	if got := config.OS + "/" + config.Architecture; got != platform {
		t.Errorf("%s is an image for %s, want %s", ref, got, platform)
	}
	if len(m.Layers) == 0 {
		t.Errorf("%s has no layers", ref)
	}
	for _, l := range m.Layers {
		registryGet(t, http.MethodHead, ref, "blobs", l.Digest)
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// extract writes the file name of a tar.gz archive into dir and returns its path.
func extract(t *testing.T, archive, name, dir string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s holds no %s: %v", archive, name, err)
		}
		if strings.TrimPrefix(h.Name, "./") != name {
			continue
		}
		out := filepath.Join(dir, name)
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// spdxPURLs reads an SPDX 2.3 JSON document and returns the package URLs of its packages.
func spdxPURLs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			ExternalRefs []struct {
				Type    string `json:"referenceType"`
				Locator string `json:"referenceLocator"`
			} `json:"externalRefs"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Fatalf("%s is not an SPDX 2.3 document", path)
	}
	var purls []string
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			if r.Type == "purl" {
				purls = append(purls, r.Locator)
			}
		}
	}
	return purls
}
