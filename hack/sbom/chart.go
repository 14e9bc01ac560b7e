package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// chartContents is what a chart's SBOM lists: the packaged chart's sha256, its Chart.yaml's
// version, and the images its values.yaml names.
type chartContents struct {
	sha256, version string
	// The image the chart deploys: repository, tag (the appVersion when values.yaml sets none,
	// as the chart's templates do) and the digest it is pulled by.
	repository, tag, digest string
	// The image prefixes shadow Deployments may run (leastPrivilege.imagePrefixes).
	imagePrefixes []string
}

var (
	digestRE     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	repositoryRE = regexp.MustCompile(`^(\[::1\]|[a-z0-9.-]+)(:[0-9]+)?(/[a-z0-9._-]+)+$`)
)

// readChart reads a chart packaged by helm package: a gzipped tar of one directory holding
// Chart.yaml and values.yaml.
func readChart(file string) (*chartContents, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	c := &chartContents{sha256: hex.EncodeToString(sum[:])}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: not a packaged chart (a gzipped tar): %w", file, err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	top := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a packaged chart (a gzipped tar): %w", file, err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		dir, rest, _ := strings.Cut(name, "/")
		if top == "" {
			top = dir
		}
		if dir != top {
			return nil, fmt.Errorf("%s: holds %s and %s: a packaged chart is one directory", file, top, dir)
		}
		if strings.HasPrefix(rest, "charts/") && h.Typeflag == tar.TypeReg {
			return nil, fmt.Errorf("%s: holds the subchart %s, whose images this SBOM would not list: list them, or package the chart without it", file, name)
		}
		if (rest == "Chart.yaml" || rest == "values.yaml") && h.Typeflag == tar.TypeReg {
			if files[rest], err = io.ReadAll(io.LimitReader(tr, 4<<20)); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range []string{"Chart.yaml", "values.yaml"} {
		if files[name] == nil {
			return nil, fmt.Errorf("%s: no %s/%s: not a packaged chart", file, top, name)
		}
	}
	meta, _ := yamlValues(files["Chart.yaml"])
	values, lists := yamlValues(files["values.yaml"])
	c.version = meta["version"]
	c.repository, c.tag, c.digest = values["image.repository"], values["image.tag"], values["image.digest"]
	if c.tag == "" {
		c.tag = meta["appVersion"]
	}
	switch {
	case !repositoryRE.MatchString(c.repository):
		return nil, fmt.Errorf("%s: values.yaml's image.repository %q is not a registry host with a path in lower case, such as ghcr.io/interlink-hq/shadowgate", file, c.repository)
	case c.tag == "":
		return nil, fmt.Errorf("%s: values.yaml sets no image.tag and Chart.yaml no appVersion: set one", file)
	case !digestRE.MatchString(c.digest):
		return nil, fmt.Errorf("%s: values.yaml's image.digest %q is not sha256:<64 hex digits>: the SBOM names the image the chart deploys by digest, so set it to the image's (hack/release.sh does)", file, c.digest)
	}
	c.imagePrefixes = lists["leastPrivilege.imagePrefixes"]
	return c, nil
}

// addChart adds the image a chart deploys and the images its shadows may run as what the
// chart depends on.
func (d *document) addChart(c *chartContents) {
	root := d.root().SPDXID
	name := c.repository[strings.LastIndex(c.repository, "/")+1:]
	// pkg:oci/<name>@<digest>?repository_url=<repository>&tag=<tag>, as the package URL
	// specification's oci type writes an image.
	purl := "pkg:oci/" + name + "@" + strings.Replace(c.digest, ":", "%3A", 1) +
		"?repository_url=" + purlPath(c.repository) + "&tag=" + strings.ReplaceAll(url.QueryEscape(c.tag), "%2F", "/")
	img := d.add("oci-image", c.repository, c.tag, purl)
	img.PrimaryPackagePurpose = "CONTAINER"
	img.Checksums = []checksum{{Algorithm: "SHA256", Value: strings.TrimPrefix(c.digest, "sha256:")}}
	img.Comment = "The image the chart deploys (values.yaml image.repository, tag and digest), pulled by digest."
	d.relate(root, "DEPENDS_ON", img.SPDXID)
	for _, prefix := range c.imagePrefixes {
		// A prefix names no tag or digest, so no package URL, which would need the digest.
		shadow := d.add("oci-image-prefix", prefix, "", "")
		shadow.PrimaryPackagePurpose = "CONTAINER"
		shadow.Comment = "Images starting with " + strconv.Quote(prefix) + " are those shadow Deployments may run " +
			"(values.yaml leastPrivilege.imagePrefixes); the chart pins no tag or digest of them."
		d.relate(root, "DEPENDS_ON", shadow.SPDXID)
	}
}

// yamlValues reads the block mappings and sequences of a YAML document as Helm's Chart.yaml and
// values.yaml write them, returning each scalar by its dotted path ("image.tag") and each
// sequence of scalars by its path. Flow collections ({}, []), block scalars (|, >), anchors,
// aliases, tags and sequences of mappings are skipped: a value written so is absent.
func yamlValues(data []byte) (map[string]string, map[string][]string) {
	scalars, lists := map[string]string{}, map[string][]string{}
	type key struct {
		indent int
		name   string
	}
	var stack []key
	skipDeeper := -1 // lines indented deeper than this belong to a value that is skipped
	pathOf := func(names ...string) string {
		parts := make([]string, 0, len(stack)+len(names))
		for _, k := range stack {
			parts = append(parts, k.name)
		}
		return strings.Join(append(parts, names...), ".")
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(stripComment(sc.Text()), " \t")
		content := strings.TrimLeft(line, " ")
		indent := len(line) - len(content)
		if content == "" || content == "---" {
			continue
		}
		if skipDeeper >= 0 {
			if indent > skipDeeper {
				continue
			}
			skipDeeper = -1
		}
		if item, ok := strings.CutPrefix(content, "- "); ok || content == "-" {
			for len(stack) > 0 && stack[len(stack)-1].indent > indent {
				stack = stack[:len(stack)-1]
			}
			if _, _, mapping := cutKey(item); !mapping && len(stack) > 0 {
				if v, ok := yamlScalar(item); ok {
					p := pathOf()
					lists[p] = append(lists[p], v)
					continue
				}
			}
			skipDeeper = indent
			continue
		}
		name, value, ok := cutKey(content)
		if !ok {
			continue // a plain scalar's continuation line
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		if value == "" {
			stack = append(stack, key{indent, name})
			continue
		}
		if v, ok := yamlScalar(value); ok {
			scalars[pathOf(name)] = v
		} else {
			skipDeeper = indent
		}
	}
	return scalars, lists
}

// cutKey splits a mapping entry "key: value" or "key:" into its plain or quoted key and value.
func cutKey(content string) (string, string, bool) {
	if content == "" {
		return "", "", false
	}
	end := 0 // where the key's quotes close
	if q := content[0]; q == '"' || q == '\'' {
		end = quotedEnd(content)
		if end < 0 {
			return "", "", false
		}
	}
	i := strings.Index(content[end:], ": ")
	if i < 0 {
		if !strings.HasSuffix(content, ":") {
			return "", "", false
		}
		i = len(content) - 1 - end
	}
	name, ok := yamlScalar(content[:end+i])
	if !ok {
		return "", "", false
	}
	return name, strings.TrimSpace(content[end+i+1:]), true
}

// quotedEnd is the index just past the quoted scalar s starts with, or -1.
func quotedEnd(s string) int {
	for i := 1; i < len(s); i++ {
		switch {
		case s[0] == '"' && s[i] == '\\':
			i++
		case s[i] == s[0] && s[0] == '\'' && i+1 < len(s) && s[i+1] == '\'':
			i++
		case s[i] == s[0]:
			return i + 1
		}
	}
	return -1
}

// yamlScalar is a plain, single-quoted or double-quoted scalar's value; not ok for what starts
// a flow collection, block scalar, anchor, alias or tag.
func yamlScalar(s string) (string, bool) {
	switch {
	case s == "":
		return "", false
	case s == "~" || s == "null" || s == "Null" || s == "NULL":
		return "", true
	case strings.HasPrefix(s, `"`):
		v, err := strconv.Unquote(s)
		return v, err == nil
	case strings.HasPrefix(s, "'"):
		if len(s) < 2 || !strings.HasSuffix(s, "'") {
			return "", false
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), true
	case strings.ContainsRune("{[|>&*!%@`", rune(s[0])):
		return "", false
	}
	return s, true
}

// stripComment removes a line's comment: a # at its start or after a space, outside quotes.
func stripComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case (c == '"' || c == '\'') && (i == 0 || line[i-1] == ' '):
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}
