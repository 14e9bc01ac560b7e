package main

import (
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

const (
	testDigest   = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	chartYAML    = "apiVersion: v2\nname: shadowgate\nversion: 1.2.0\nappVersion: \"1.2.0\"\n"
	releasedVals = `# The values, as hack/release.sh sets them.
image:
  # Repository of the image.
  repository: 127.0.0.1:5000/interlink-hq/shadowgate
  tag: "1.2.0"
  digest: "` + testDigest + `" # pulled by it
  pullPolicy: IfNotPresent
imagePullSecrets: []
monitoring:
  alerts: {for: 5m, severity: critical}
webhooks:
  virtualNodes:
  - name: vk
    image: not-this
leastPrivilege:
  imagePrefixes:
  - "127.0.0.1:5000/interlink-hq/shadowgate/shadow:"
`
)

// chartArchive writes a chart packaged as helm package does: a gzipped tar of its directory.
func chartArchive(t *testing.T, files []tarFile) string {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := w.Write(tarOf(t, files)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shadowgate-1.2.0.tgz")
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAChartSBOMNamesTheImagesItsValuesName(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	imagePURL := "pkg:oci/shadowgate@sha256%3A" + strings.TrimPrefix(testDigest, "sha256:") +
		"?repository_url=127.0.0.1:5000/interlink-hq/shadowgate&tag="
	for _, tc := range []struct {
		name         string
		values       string
		wantPURLs    []string
		wantPrefixes []string
	}{{
		name:         "the released values name the webhook image by repository, tag and digest, and the shadow image's prefix",
		values:       releasedVals,
		wantPURLs:    []string{imagePURL + "1.2.0"},
		wantPrefixes: []string{"127.0.0.1:5000/interlink-hq/shadowgate/shadow:"},
	}, {
		name:         "an empty tag is the chart's appVersion, as the templates render it",
		values:       strings.Replace(releasedVals, `tag: "1.2.0"`, `tag: ""`, 1),
		wantPURLs:    []string{imagePURL + "1.2.0"},
		wantPrefixes: []string{"127.0.0.1:5000/interlink-hq/shadowgate/shadow:"},
	}, {
		name: "several prefixes are each listed; none is no prefix",
		values: strings.Replace(releasedVals, `  - "127.0.0.1:5000/interlink-hq/shadowgate/shadow:"`,
			"  - 'registry.example.org/ssh-tunnel:'\n  - \"127.0.0.1:5000/interlink-hq/shadowgate/shadow:\"", 1),
		wantPURLs:    []string{imagePURL + "1.2.0"},
		wantPrefixes: []string{"registry.example.org/ssh-tunnel:", "127.0.0.1:5000/interlink-hq/shadowgate/shadow:"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			archive := chartArchive(t, []tarFile{
				{name: "shadowgate/Chart.yaml", data: []byte(chartYAML)},
				{name: "shadowgate/values.yaml", data: []byte(tc.values)},
				{name: "shadowgate/templates/deployment.yaml", data: []byte("kind: Deployment\n")},
			})
			var out, again bytes.Buffer
			args := []string{"chart", "-name", "127.0.0.1:5000/interlink-hq/charts/shadowgate", "-version", "1.2.0", archive}
			if err := run(args, &out); err != nil {
				t.Fatal(err)
			}
			if err := run(args, &again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), again.Bytes()) {
				t.Errorf("two runs over the same chart wrote different documents")
			}
			if got := purls(t, out.Bytes()); !slices.Equal(got, tc.wantPURLs) {
				t.Errorf("package URLs %v, want %v", got, tc.wantPURLs)
			}
			var doc document
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(archive)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			root := doc.Packages[0]
			if root.Name != "127.0.0.1:5000/interlink-hq/charts/shadowgate" || root.VersionInfo != "1.2.0" ||
				len(root.Checksums) != 1 || root.Checksums[0].Value != hex.EncodeToString(sum[:]) {
				t.Errorf("the described package is %+v, want the chart at 1.2.0 with the archive's sha256", root)
			}
			var prefixes []string
			for _, p := range doc.Packages[1:] {
				if !slices.Contains(doc.Relationships, relationship{Element: root.SPDXID, Type: "DEPENDS_ON", Related: p.SPDXID}) {
					t.Errorf("no relationship: the chart DEPENDS_ON %s", p.SPDXID)
				}
				if len(p.ExternalRefs) == 0 {
					prefixes = append(prefixes, p.Name)
				}
			}
			if !slices.Equal(prefixes, tc.wantPrefixes) {
				t.Errorf("image prefixes %v, want %v", prefixes, tc.wantPrefixes)
			}
			if !strings.Contains(out.String(), `"created": "2023-11-14T22:13:20Z"`) {
				t.Errorf("the creation time is not SOURCE_DATE_EPOCH's")
			}
		})
	}
}

func TestAChartSBOMRefusesAChartItCannotListWhole(t *testing.T) {
	files := func(values string, extra ...tarFile) []tarFile {
		return append([]tarFile{
			{name: "shadowgate/Chart.yaml", data: []byte(chartYAML)},
			{name: "shadowgate/values.yaml", data: []byte(values)},
		}, extra...)
	}
	for _, tc := range []struct {
		name    string
		files   []tarFile
		version string
		want    string
	}{{
		name:  "an image not pinned by digest",
		files: files(strings.Replace(releasedVals, testDigest, "", 1)),
		want:  `values.yaml's image.digest "" is not sha256:<64 hex digits>`,
	}, {
		name:  "an image repository that is no registry path",
		files: files(strings.Replace(releasedVals, "127.0.0.1:5000/interlink-hq/shadowgate\n", "Shadowgate\n", 1)),
		want:  `values.yaml's image.repository "Shadowgate" is not a registry host with a path`,
	}, {
		name:  "an image repository written as a flow mapping, which the SBOM does not read",
		files: files(strings.Replace(releasedVals, "image:\n  # Repository of the image.\n  repository: 127.0.0.1:5000/interlink-hq/shadowgate\n", "image: {repository: x}\n", 1)),
		want:  `values.yaml's image.repository ""`,
	}, {
		name:    "a version other than Chart.yaml's",
		files:   files(releasedVals),
		version: "1.3.0",
		want:    `Chart.yaml's version is "1.2.0", not -version "1.3.0"`,
	}, {
		name:  "a chart without values.yaml",
		files: []tarFile{{name: "shadowgate/Chart.yaml", data: []byte(chartYAML)}},
		want:  "no shadowgate/values.yaml: not a packaged chart",
	}, {
		name:  "a subchart, whose images it would miss",
		files: files(releasedVals, tarFile{name: "shadowgate/charts/redis/Chart.yaml", data: []byte(chartYAML)}),
		want:  "holds the subchart shadowgate/charts/redis/Chart.yaml",
	}, {
		name:  "two directories",
		files: files(releasedVals, tarFile{name: "other/values.yaml", data: []byte(releasedVals)}),
		want:  "holds shadowgate and other: a packaged chart is one directory",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			version := tc.version
			if version == "" {
				version = "1.2.0"
			}
			err := run([]string{"chart", "-name", "c", "-version", version, chartArchive(t, tc.files)}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal saying %s", err, tc.want)
			}
		})
	}
	t.Run("a file that is no gzipped tar", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.tgz")
		if err := os.WriteFile(path, []byte("not a chart"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := run([]string{"chart", "-name", "c", "-version", "1", path}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "not a packaged chart") {
			t.Fatalf("got %v, want a refusal saying it is not a packaged chart", err)
		}
	})
}

// The chart's own values.yaml, read as the release's chart SBOM reads it.
func TestTheChartsValuesReadAsTheSBOMReadsThem(t *testing.T) {
	data, err := os.ReadFile("../../manifests/chart/shadowgate/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scalars, lists := yamlValues(data)
	for path, want := range map[string]string{
		"image.repository":                   "ghcr.io/interlink-hq/shadowgate",
		"image.tag":                          "",
		"image.digest":                       "",
		"image.pullPolicy":                   "IfNotPresent",
		"monitoring.alerts.runbookBase":      "https://github.com/interlink-hq/shadowgate/blob/main/docs/monitoring.md",
		"webhooks.timeoutSeconds.mutatePods": "5",
	} {
		if got, ok := scalars[path]; !ok || got != want {
			t.Errorf("%s: got %q (set: %v), want %q", path, got, ok, want)
		}
	}
	for path, want := range map[string][]string{
		"leastPrivilege.imagePrefixes": {"ghcr.io/interlink-hq/shadowgate/shadow:"},
		"webhooks.exemptNamespaces":    {"kube-system"},
	} {
		if got := lists[path]; !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", path, got, want)
		}
	}
	if _, ok := scalars["monitoring.alerts.webhookUnreachable"]; ok {
		t.Errorf("a flow mapping was read as a scalar")
	}
}
