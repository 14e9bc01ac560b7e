package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// purls are the package URLs a document names.
func purls(t *testing.T, out []byte) []string {
	t.Helper()
	var doc document
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("the SBOM is not JSON: %v\n%s", err, out)
	}
	if doc.SPDXVersion != "SPDX-2.3" || len(doc.DocumentDescribes) != 1 || doc.DocumentDescribes[0] != doc.Packages[0].SPDXID {
		t.Fatalf("not an SPDX 2.3 document describing its first package:\n%s", out)
	}
	var all []string
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			all = append(all, r.Locator)
		}
	}
	return all
}

func TestAGoBinarySBOMNamesItsModules(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	var out bytes.Buffer
	// The test binary is a Go binary of this module.
	if err := run([]string{"go", "-name", "shadowgate", "-version", "1.2.3", os.Args[0]}, &out); err != nil {
		t.Fatal(err)
	}
	got := purls(t, out.Bytes())
	for _, want := range []string{"pkg:golang/github.com/interlink-hq/shadowgate@1.2.3", "pkg:golang/stdlib@go"} {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("no package URL %s* in %v", want, got)
		}
	}
	if !strings.Contains(out.String(), `"created": "2023-11-14T22:13:20Z"`) {
		t.Errorf("the creation time is not SOURCE_DATE_EPOCH's:\n%.400s", out.String())
	}
}

func TestAnImageSBOMNamesItsInstalledDebsAndGoBinariesAsItsLayersLeaveThem(t *testing.T) {
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	status := func(pkgs ...string) []byte { return []byte(strings.Join(pkgs, "\n\n") + "\n") }
	layers := [][]tarFile{{
		{name: "./", dir: true},
		{name: "etc/os-release", data: []byte("NAME=\"Debian GNU/Linux\"\nID=debian\nVERSION_ID=\"12\"\n")},
		{name: "var/lib/dpkg/status", data: status(
			"Package: socat\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.7.4.4-2",
			"Package: removed\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1")},
		{name: "usr/bin/kept", data: self, mode: 0o755},
		{name: "usr/bin/whited-out", data: self, mode: 0o755},
		{name: "opt/cleared/tool", data: self, mode: 0o755},
	}, {
		{name: "./", dir: true},
		{name: "usr/bin/.wh.whited-out"},
		{name: "opt/cleared/.wh..wh..opq"},
		{name: "var/lib/dpkg/status", data: status(
			"Package: socat\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.7.4.4-2",
			"Package: openssh-client\nStatus: install ok installed\nArchitecture: amd64\nSource: openssh\nVersion: 1:9.2p1-2+deb12u7")},
	}}
	archive := ociArchive(t, layers)
	var out bytes.Buffer
	if err := run([]string{"image", "-name", "example/shadow", "-version", "0.1.0", archive}, &out); err != nil {
		t.Fatal(err)
	}
	got := purls(t, out.Bytes())
	for _, want := range []string{
		"pkg:deb/debian/socat@1.7.4.4-2?arch=amd64&distro=debian-12",
		"pkg:deb/debian/openssh-client@1:9.2p1-2+deb12u7?arch=amd64&distro=debian-12",
		"pkg:golang/github.com/interlink-hq/shadowgate@0.1.0",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no package URL %s in %v", want, got)
		}
	}
	for _, absent := range []string{"removed", "/usr/bin/whited-out", "/opt/cleared/tool"} {
		if strings.Contains(out.String(), `"name": "`+absent+`"`) {
			t.Errorf("the SBOM names %s, which the image does not hold", absent)
		}
	}
	if !strings.Contains(out.String(), `"name": "/usr/bin/kept"`) {
		t.Errorf("the SBOM does not name the Go binary /usr/bin/kept")
	}
}

func TestAnArchiveOfNoImageIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.tar")
	if err := os.WriteFile(path, tarOf(t, []tarFile{{name: "hello", data: []byte("hi")}}), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"image", "-name", "x", "-version", "1", path}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "not an OCI archive") {
		t.Fatalf("got %v, want a refusal saying it is not an OCI archive", err)
	}
}

type tarFile struct {
	name string
	data []byte
	mode int64
	dir  bool
}

func tarOf(t *testing.T, files []tarFile) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}
		if f.mode != 0 {
			h.Mode = f.mode
		}
		if f.dir {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ociArchive writes an OCI archive of one image of these layers, gzipped, as buildah does.
func ociArchive(t *testing.T, layers [][]tarFile) string {
	var files []tarFile
	blob := func(data []byte) string {
		sum := sha256.Sum256(data)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		files = append(files, tarFile{name: blobPath(digest), data: data})
		return digest
	}
	var descs []map[string]any
	for _, l := range layers {
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		if _, err := w.Write(tarOf(t, l)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		descs = append(descs, map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
			"digest": blob(gz.Bytes()), "size": gz.Len()})
	}
	manifest, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"layers": descs})
	if err != nil {
		t.Fatal(err)
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []map[string]any{{
		"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": blob(manifest), "size": len(manifest)}}})
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, tarFile{name: "index.json", data: index})
	path := filepath.Join(t.TempDir(), "image.oci.tar")
	if err := os.WriteFile(path, tarOf(t, files), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
