// Command sbom writes a release artifact's software bill of materials as an SPDX 2.3 JSON
// document (hack/release.sh runs it for each artifact):
//
//	sbom go -name NAME -version VERSION BINARY      a Go binary: the modules its build info names
//	sbom image -name NAME -version VERSION ARCHIVE  an image in an OCI archive (one image): the
//	                                                Debian packages of its dpkg status, and each
//	                                                Go binary in it with its modules
//	sbom chart -name NAME -version VERSION CHART    a packaged Helm chart (.tgz): the images its
//	                                                values.yaml names (image.repository, tag and
//	                                                digest; leastPrivilege.imagePrefixes)
//
// The document goes to standard output. Its creation time is SOURCE_DATE_EPOCH when set (the
// release sets the commit's time), so the same input gives the same document.
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

const usage = "usage: sbom go|image|chart -name NAME -version VERSION FILE"

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) < 1 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("sbom "+args[0], flag.ContinueOnError)
	name := fs.String("name", "", "the artifact's name, such as ghcr.io/interlink-hq/shadowgate")
	version := fs.String("version", "", "the artifact's version")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 || *name == "" || *version == "" {
		return errors.New(usage)
	}
	created, err := creationTime(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	doc := newDocument(*name, *version, created)
	switch args[0] {
	case "go":
		info, err := buildinfo.ReadFile(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("%s: no Go build info: %w", fs.Arg(0), err)
		}
		doc.root().PrimaryPackagePurpose = "APPLICATION"
		doc.addGo(doc.Packages[0].SPDXID, info, *version)
	case "image":
		contents, err := readImage(fs.Arg(0))
		if err != nil {
			return err
		}
		doc.root().PrimaryPackagePurpose = "CONTAINER"
		doc.root().Checksums = []checksum{{Algorithm: "SHA256", Value: strings.TrimPrefix(contents.digest, "sha256:")}}
		doc.addImage(contents)
	case "chart":
		c, err := readChart(fs.Arg(0))
		if err != nil {
			return err
		}
		if c.version != *version {
			return fmt.Errorf("%s: Chart.yaml's version is %q, not -version %q: package the chart with --version %s", fs.Arg(0), c.version, *version, *version)
		}
		doc.root().PrimaryPackagePurpose = "INSTALL"
		doc.root().Checksums = []checksum{{Algorithm: "SHA256", Value: c.sha256}}
		doc.addChart(c)
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
	return doc.write(out)
}

// creationTime is SOURCE_DATE_EPOCH's time, or now when it is empty.
func creationTime(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Now().UTC(), nil
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds since 1970: %w", epoch, err)
	}
	return time.Unix(s, 0).UTC(), nil
}

// The parts of SPDX 2.3 (https://spdx.github.io/spdx-spec/v2.3/) the documents use.
type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	DocumentDescribes []string       `json:"documentDescribes"`
	Packages          []*pkg         `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type pkg struct {
	SPDXID                string        `json:"SPDXID"`
	Name                  string        `json:"name"`
	VersionInfo           string        `json:"versionInfo,omitempty"`
	Supplier              string        `json:"supplier,omitempty"`
	DownloadLocation      string        `json:"downloadLocation"`
	FilesAnalyzed         bool          `json:"filesAnalyzed"`
	LicenseConcluded      string        `json:"licenseConcluded"`
	LicenseDeclared       string        `json:"licenseDeclared"`
	CopyrightText         string        `json:"copyrightText"`
	PrimaryPackagePurpose string        `json:"primaryPackagePurpose,omitempty"`
	Checksums             []checksum    `json:"checksums,omitempty"`
	SourceInfo            string        `json:"sourceInfo,omitempty"`
	Comment               string        `json:"comment,omitempty"`
	ExternalRefs          []externalRef `json:"externalRefs,omitempty"`
}

type checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type externalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

func newDocument(name, version string, created time.Time) *document {
	d := &document{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        name + "@" + version,
		CreationInfo: creationInfo{
			Created:  created.Format(time.RFC3339),
			Creators: []string{"Organization: interlink-hq", "Tool: shadowgate-sbom"},
		},
	}
	root := d.add("", name, version, "")
	d.DocumentDescribes = []string{root.SPDXID}
	d.relate(d.SPDXID, "DESCRIBES", root.SPDXID)
	return d
}

func (d *document) root() *pkg { return d.Packages[0] }

var notIDChar = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// add appends a package, its SPDXID made of kind, name and version (SPDX allows letters, digits,
// '.' and '-' there) and unique in the document.
func (d *document) add(kind, name, version, purl string) *pkg {
	id := "SPDXRef-" + strings.Trim(notIDChar.ReplaceAllString(strings.Join([]string{kind, name, version}, "-"), "-"), "-")
	for base, n := id, 2; slices.ContainsFunc(d.Packages, func(p *pkg) bool { return p.SPDXID == id }); n++ {
		id = base + "-" + strconv.Itoa(n)
	}
	p := &pkg{SPDXID: id, Name: name, VersionInfo: version, DownloadLocation: noAssertion,
		LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion}
	if purl != "" {
		p.ExternalRefs = []externalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: purl}}
	}
	d.Packages = append(d.Packages, p)
	return p
}

func (d *document) relate(element, typ, related string) {
	d.Relationships = append(d.Relationships, relationship{Element: element, Type: typ, Related: related})
}

// addGo adds a Go binary's main module, the Go standard library and each module it was built
// with, as dependencies of parent. mainVersion stands for the main module's "(devel)".
func (d *document) addGo(parent string, info *buildinfo.BuildInfo, mainVersion string) {
	version := info.Main.Version
	if version == "" || version == "(devel)" {
		version = mainVersion
	}
	main := d.add("go-module", info.Main.Path, version, goPURL(info.Main.Path, version))
	main.PrimaryPackagePurpose = "LIBRARY"
	d.relate(parent, "CONTAINS", main.SPDXID)
	std := d.add("go-stdlib", "stdlib", info.GoVersion, goPURL("stdlib", info.GoVersion))
	d.relate(main.SPDXID, "DEPENDS_ON", std.SPDXID)
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		dep := d.add("go-module", m.Path, m.Version, goPURL(m.Path, m.Version))
		if m.Sum != "" {
			dep.SourceInfo = "go.sum " + m.Sum
		}
		d.relate(main.SPDXID, "DEPENDS_ON", dep.SPDXID)
	}
}

// goPURL is a Go module's package URL (pkg:golang/<path>@<version>).
func goPURL(module, version string) string {
	return "pkg:golang/" + purlPath(module) + "@" + url.PathEscape(version)
}

func purlPath(p string) string {
	parts := strings.Split(p, "/")
	for i := range parts {
		parts[i] = url.PathEscape(parts[i])
	}
	return strings.Join(parts, "/")
}

// addImage adds an image's Debian packages and Go binaries as what its root package contains.
func (d *document) addImage(c *imageContents) {
	root := d.root().SPDXID
	for _, p := range c.debs {
		purl := "pkg:deb/" + url.PathEscape(c.distro) + "/" + url.PathEscape(p.name) + "@" + url.PathEscape(p.version) +
			"?arch=" + url.QueryEscape(p.arch)
		if c.distroVersion != "" {
			purl += "&distro=" + url.QueryEscape(c.distro+"-"+c.distroVersion)
		}
		deb := d.add("deb", p.name, p.version, purl)
		deb.Supplier = "Organization: " + c.distroName
		if p.source != "" {
			deb.SourceInfo = "built from Debian source package " + p.source
		}
		d.relate(root, "CONTAINS", deb.SPDXID)
	}
	for _, path := range slices.Sorted(maps.Keys(c.goBinaries)) {
		bin := d.add("go-binary", path, "", "")
		bin.PrimaryPackagePurpose = "APPLICATION"
		d.relate(root, "CONTAINS", bin.SPDXID)
		d.addGo(bin.SPDXID, c.goBinaries[path], d.root().VersionInfo)
	}
}

// write sets the document's namespace, a URI unique to its content, and writes it.
func (d *document) write(out io.Writer) error {
	d.DocumentNamespace = ""
	body, err := json.Marshal(d)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	d.DocumentNamespace = "https://github.com/interlink-hq/shadowgate/spdx/" + url.PathEscape(d.Name) + "-" + hex.EncodeToString(sum[:8])
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(d)
}

// deb is a package of a dpkg status file, installed.
type deb struct{ name, version, arch, source string }

// imageContents is what an image's SBOM lists: its manifest's digest, the Debian packages its
// dpkg status names as installed, and the Go binaries in it by path.
type imageContents struct {
	digest                            string
	distro, distroName, distroVersion string
	debs                              []deb
	goBinaries                        map[string]*buildinfo.BuildInfo
}

// maxBinary bounds the size of a file read whole to look for Go build info.
const maxBinary = 512 << 20

// readImage reads the one image of an OCI archive (an OCI image layout in a tar, as buildah
// push oci-archive: writes it), applying its layers in order, whiteouts included.
func readImage(archive string) (*imageContents, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := readJSON(f, "index.json", &index); err != nil {
		return nil, fmt.Errorf("%s: not an OCI archive: %w", archive, err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" {
		return nil, fmt.Errorf("%s: its index.json must name exactly one OCI image manifest, not %+v", archive, index.Manifests)
	}
	c := &imageContents{digest: index.Manifests[0].Digest, distro: "debian", distroName: "Debian",
		goBinaries: map[string]*buildinfo.BuildInfo{}}
	var manifest struct {
		Layers []descriptor `json:"layers"`
	}
	if err := readJSON(f, blobPath(c.digest), &manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	files := map[string][]byte{} // the files the SBOM reads, by path, as the layers leave them
	for _, layer := range manifest.Layers {
		if err := applyLayer(f, layer, files, c.goBinaries); err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", archive, layer.Digest, err)
		}
	}
	osRelease := files["etc/os-release"]
	if osRelease == nil {
		osRelease = files["usr/lib/os-release"]
	}
	fields := keyValues(osRelease)
	if fields["ID"] != "" {
		c.distro = fields["ID"]
		c.distroName = fields["NAME"]
		c.distroVersion = fields["VERSION_ID"]
	}
	if status := files["var/lib/dpkg/status"]; status != nil {
		c.debs = installedDebs(status)
	}
	return c, nil
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
}

func blobPath(digest string) string { return "blobs/" + strings.Replace(digest, ":", "/", 1) }

// findEntry positions a tar reader over the archive at the entry of that name.
func findEntry(f *os.File, name string) (*tar.Reader, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("no %s in the archive", name)
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(h.Name, "./") == name {
			return tr, nil
		}
	}
}

func readJSON(f *os.File, name string, v any) error {
	tr, err := findEntry(f, name)
	if err != nil {
		return err
	}
	if err := json.NewDecoder(io.LimitReader(tr, 4<<20)).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// applyLayer applies a layer to the files the SBOM reads and to the Go binaries found so far.
func applyLayer(f *os.File, layer descriptor, files map[string][]byte, goBinaries map[string]*buildinfo.BuildInfo) error {
	tr, err := findEntry(f, blobPath(layer.Digest))
	if err != nil {
		return err
	}
	var r io.Reader = tr
	switch layer.MediaType {
	case "application/vnd.oci.image.layer.v1.tar":
	case "application/vnd.oci.image.layer.v1.tar+gzip":
		gz, err := gzip.NewReader(tr)
		if err != nil {
			return err
		}
		defer gz.Close()
		r = gz
	default:
		return fmt.Errorf("media type %q is not a tar or gzipped tar layer", layer.MediaType)
	}
	lr := tar.NewReader(r)
	for {
		h, err := lr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		dir, base := path.Split(name)
		switch {
		case base == ".wh..wh..opq":
			removeUnder(files, goBinaries, strings.TrimSuffix(dir, "/"), false)
			continue
		case strings.HasPrefix(base, ".wh."):
			removeUnder(files, goBinaries, dir+strings.TrimPrefix(base, ".wh."), true)
			continue
		}
		if name == "" || h.Typeflag == tar.TypeDir {
			continue // a directory over a directory keeps what is in it
		}
		removeUnder(files, goBinaries, name, true)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		switch name {
		case "etc/os-release", "usr/lib/os-release", "var/lib/dpkg/status":
			if files[name], err = io.ReadAll(io.LimitReader(lr, 64<<20)); err != nil {
				return err
			}
			continue
		}
		if h.Size < 4 || h.Size > maxBinary || h.Mode&0o111 == 0 {
			continue
		}
		data, err := io.ReadAll(lr)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(data, []byte("\x7fELF")) {
			continue
		}
		if info, err := buildinfo.Read(bytes.NewReader(data)); err == nil {
			goBinaries["/"+name] = info
		}
	}
}

// removeUnder forgets the file at p (when self) and every file under it.
func removeUnder(files map[string][]byte, goBinaries map[string]*buildinfo.BuildInfo, p string, self bool) {
	under := func(name string) bool {
		return (self && name == p) || p == "" || strings.HasPrefix(name, p+"/")
	}
	for name := range files {
		if under(name) {
			delete(files, name)
		}
	}
	for name := range goBinaries {
		if under(strings.TrimPrefix(name, "/")) {
			delete(goBinaries, name)
		}
	}
}

// keyValues reads an os-release file's KEY=value lines, unquoting the values.
func keyValues(data []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		out[k] = v
	}
	return out
}

// installedDebs reads a dpkg status file's stanzas, keeping the installed packages, sorted
// by name.
func installedDebs(status []byte) []deb {
	var debs []deb
	for _, stanza := range strings.Split(string(status), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
				fields[k] = v
			}
		}
		if fields["Package"] == "" || fields["Status"] != "install ok installed" {
			continue
		}
		source, _, _ := strings.Cut(fields["Source"], " ")
		debs = append(debs, deb{name: fields["Package"], version: fields["Version"], arch: fields["Architecture"], source: source})
	}
	slices.SortFunc(debs, func(a, b deb) int { return strings.Compare(a.name+":"+a.arch, b.name+":"+b.arch) })
	return debs
}
