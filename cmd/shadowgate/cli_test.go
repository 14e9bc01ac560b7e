package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const (
	examplePolicy = "../../manifests/examples/policy.yaml"
	notebook      = "../../manifests/examples/notebook.yaml"
	trainer       = "../../manifests/examples/trainer.yaml"
	refused       = "testdata/refused-trainer.yaml"
)

// runCLI runs the CLI as the binary would and returns its exit code and output.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run("shadowgate", args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

type jsonError struct {
	Field, Type string
	Value       any
	Detail      string
}

type jsonResult struct {
	Kind, Namespace, Name string
	Allowed               bool
	Errors                []jsonError
	Warnings              []string
}

func TestCheckExamplesAreAdmitted(t *testing.T) {
	code, out, errOut := runCLI(t, "", "check", "--policy", examplePolicy, "-f", notebook, "-f", trainer, "-f", examplePolicy)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// The example's virtual nodes are bound to no namespace, which the policy ConfigMap's
	// admission says of each (validate.PolicyWarnings).
	want := "Pod user/notebook: admitted\nPod user/trainer: admitted\n" +
		"ConfigMap shadowgate-system/shadowgate-policy: Warning: data[policy.yaml].virtualNodes[cern-vk]: any namespace may use virtual node cern-vk\n" +
		"ConfigMap shadowgate-system/shadowgate-policy: Warning: data[policy.yaml].virtualNodes[hpc-vk]: any namespace may use virtual node hpc-vk\n" +
		"ConfigMap shadowgate-system/shadowgate-policy: admitted\n"
	if got := unboundWarningsCut.ReplaceAllString(out, ""); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// unboundWarningsCut cuts the unbound-node warning after the node's name.
var unboundWarningsCut = regexp.MustCompile(`, and every pod on it runs its job as .*`)

func TestCheckRefusalText(t *testing.T) {
	code, out, _ := runCLI(t, "", "check", "--policy", examplePolicy, "-f", refused)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantPrefixes := []string{
		`Pod user/trainer: metadata.annotations[interlink.eu/reverse-forwards]: Invalid value: "kubernetes.default.svc.cluster.local:443": port 443 is below 1024`,
		`Pod user/trainer: metadata.annotations[interlink.eu/reverse-bind]: Invalid value: "127.0.0.1": 127.0.0.1 is shared`,
	}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("output has %d lines, want %d:\n%s", len(lines), len(wantPrefixes), out)
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d:\n%s\nwant prefix:\n%s", i, lines[i], p)
		}
	}
}

func TestCheckJSONContract(t *testing.T) {
	code, out, _ := runCLI(t, "", "check", "--policy", examplePolicy, "-f", notebook, "-f", refused, "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var got struct{ Results []jsonResult }
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("output is not the contract's shape: %v\n%s", err, out)
	}
	for i := range got.Results {
		for j := range got.Results[i].Errors {
			got.Results[i].Errors[j].Detail = "" // the wording is not the contract
		}
	}
	want := []jsonResult{
		{Kind: "Pod", Namespace: "user", Name: "notebook", Allowed: true, Errors: []jsonError{}, Warnings: []string{}},
		{Kind: "Pod", Namespace: "user", Name: "trainer", Allowed: false, Warnings: []string{}, Errors: []jsonError{
			{Field: "metadata.annotations[interlink.eu/reverse-forwards]", Type: "Invalid value", Value: "kubernetes.default.svc.cluster.local:443"},
			{Field: "metadata.annotations[interlink.eu/reverse-bind]", Type: "Invalid value", Value: "127.0.0.1"},
		}},
	}
	if diff := cmp.Diff(want, got.Results); diff != "" {
		t.Errorf("results differ (-want +got):\n%s", diff)
	}
}

func TestCheckWorkloadsAndListsFromStdin(t *testing.T) {
	stdin, _ := readFile("testdata/workloads.yaml", nil)
	code, out, _ := runCLI(t, string(stdin), "check", "--policy", examplePolicy, "-f", "-", "--namespace", "batch", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	var got struct{ Results []jsonResult }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Results) != 2 {
		t.Fatalf("want 2 results, got %+v", got.Results)
	}
	cron, svc := got.Results[0], got.Results[1]
	if cron.Kind != "CronJob" || cron.Namespace != "batch" || cron.Allowed || len(cron.Errors) != 1 ||
		cron.Errors[0].Field != "spec.jobTemplate.spec.template.metadata.annotations[interlink.eu/reverse-socks-port]" || cron.Errors[0].Type != "Forbidden" {
		t.Errorf("CronJob result = %+v", cron)
	}
	if svc.Kind != "Service" || !svc.Allowed || len(svc.Warnings) != 1 {
		t.Errorf("Service result = %+v", svc)
	}
}

func TestPolicyCheckJSONContract(t *testing.T) {
	doc := "virtualNodes:\n  cern-vk:\n    Network:\n      ShadowMode: ssh\n      SSH: {User: alice, Auth: kerberos, KeytabSecret: kt}\n"
	code, out, _ := runCLI(t, doc, "policy", "check", "--policy", "-", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var got struct {
		Valid  bool
		Errors []jsonError
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	fields := []string{}
	for _, e := range got.Errors {
		fields = append(fields, e.Type+" "+e.Field)
	}
	want := []string{"Required value virtualNodes[cern-vk].Network.SSH.LoginHost", "Required value virtualNodes[cern-vk].Network.SSH.Principal"}
	if got.Valid || !cmp.Equal(fields, want) {
		t.Errorf("got valid=%v %q, want %q", got.Valid, fields, want)
	}

	code, out, _ = runCLI(t, "", "policy", "check", "--policy", examplePolicy, "-o", "json")
	var example struct {
		Valid    bool
		Errors   []jsonError
		Warnings []string
	}
	if err := json.Unmarshal([]byte(out), &example); err != nil {
		t.Fatal(err)
	}
	// Its two virtual nodes are bound to no namespace, which is said of each.
	if code != 0 || !example.Valid || example.Errors == nil || len(example.Errors) != 0 || len(example.Warnings) != 2 ||
		!strings.HasPrefix(example.Warnings[0], "virtualNodes[cern-vk]: any namespace may use") ||
		!strings.HasPrefix(example.Warnings[1], "virtualNodes[hpc-vk]: any namespace may use") {
		t.Errorf("example policy: exit %d\n%s", code, out)
	}
}

func TestExitCodes(t *testing.T) {
	cases := map[string]struct {
		args []string
		want int
	}{
		"an unknown flag is a usage error":             {args: []string{"check", "--bogus"}, want: 2},
		"a missing --policy is a usage error":          {args: []string{"check", "-f", notebook}, want: 2},
		"an unreadable input file is a usage error":    {args: []string{"check", "--policy", examplePolicy, "-f", "/nonexistent.yaml"}, want: 2},
		"input that is not YAML is a usage error":      {args: []string{"check", "--policy", examplePolicy, "-f", "main.go"}, want: 2},
		"an invalid policy given to check exits 2":     {args: []string{"check", "--policy", notebook, "-f", notebook}, want: 2},
		"an unknown output format is a usage error":    {args: []string{"check", "--policy", examplePolicy, "-f", notebook, "-o", "yaml"}, want: 2},
		"an unreadable policy in policy check exits 2": {args: []string{"policy", "check", "--policy", "/nonexistent.yaml"}, want: 2},
		"version exits 0":                              {args: []string{"version"}, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", tc.args...)
			if code != tc.want {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.want, out, errOut)
			}
			if tc.want == 2 && !strings.HasPrefix(errOut, "error: ") {
				t.Errorf("a usage error says nothing on stderr: %q", errOut)
			}
		})
	}
}

// A manifest checked may carry control characters in its names and annotations: check and
// render print every line escaped, never raw.
func TestCheckAndRenderPrintControlCharactersEscaped(t *testing.T) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"trainer\u001b]0;owned\u0007","namespace":"user","annotations":{` +
		`"interlink.eu/reverse-forwards":"minio\u001b[2J\u202e.user.svc.cluster.local:9000\u009b","interlink.eu/reverse-bind":"127.0.0.1"}},` +
		`"spec":{"nodeSelector":{"kubernetes.io/hostname":"hpc-vk"},"containers":[{"name":"train","image":"python"}]}}`
	for name, args := range map[string][]string{
		"check prints the refusal escaped.":  {"check", "--policy", examplePolicy, "-f", "-"},
		"render prints the refusal escaped.": {"render", "--policy", examplePolicy, "-f", "-"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runCLI(t, pod, args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s%s", code, out, errOut)
			}
			if want := `trainer\x1b]0;owned\a: metadata.annotations[interlink.eu/reverse-forwards]`; !strings.Contains(out+errOut, want) {
				t.Errorf("the output lacks %q:\n%s%s", want, out, errOut)
			}
			for _, r := range out + errOut {
				if r != '\n' && !unicode.IsPrint(r) {
					t.Errorf("the output holds %U raw:\n%q", r, out+errOut)
					break
				}
			}
		})
	}
}

// Run as kubectl-shadowgate, the name kubectl finds a plugin by, the CLI's usage lines and
// examples say `kubectl shadowgate`, the command its user types; run as shadowgate, they do not.
func TestKubectlPluginUsage(t *testing.T) {
	for name, tc := range map[string]struct {
		program string
		want    []string
		not     []string
	}{
		"Run as kubectl-shadowgate, the usage says kubectl shadowgate.": {
			program: "kubectl-shadowgate",
			want:    []string{"Usage:\n  kubectl shadowgate status [POD] [flags]", "  kubectl shadowgate status -n user\n"},
		},
		"Run as kubectl-shadowgate.exe, the usage says kubectl shadowgate.": {
			program: "kubectl-shadowgate.exe",
			want:    []string{"Usage:\n  kubectl shadowgate status [POD] [flags]"},
		},
		"Run as shadowgate, the usage says shadowgate alone.": {
			program: "shadowgate",
			want:    []string{"Usage:\n  shadowgate status [POD] [flags]", "  shadowgate status -n user\n"},
			not:     []string{"kubectl shadowgate"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tc.program, []string{"status", "--help"}, strings.NewReader(""), &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the help lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("the help holds %q:\n%s", n, out.String())
				}
			}
		})
	}
	var out, errOut bytes.Buffer
	run("kubectl-shadowgate", []string{"render", "--help"}, strings.NewReader(""), &out, &errOut)
	if want := "| kubectl shadowgate render --policy"; !strings.Contains(out.String(), want) {
		t.Errorf("render's examples lack %q:\n%s", want, out.String())
	}
}

// The krew manifest installs kubectl-shadowgate on Linux and macOS, amd64 and arm64, each from
// its own archive, with placeholders a release fills in.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile("../../hack/krew/shadowgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion, Kind string
		Metadata         struct{ Name string }
		Spec             struct {
			Version, Homepage, ShortDescription, Description string
			Platforms                                        []struct {
				Selector         struct{ MatchLabels map[string]string }
				URI, Sha256, Bin string
			}
		}
	}
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "shadowgate" {
		t.Errorf("apiVersion %q, kind %q, name %q", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if m.Spec.Version != "VERSION" || m.Spec.ShortDescription == "" || m.Spec.Description == "" {
		t.Errorf("spec: %+v", m.Spec)
	}
	platforms := map[string]bool{}
	for _, p := range m.Spec.Platforms {
		osArch := p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"]
		platforms[osArch] = true
		if !strings.HasSuffix(p.URI, "/kubectl-shadowgate_VERSION_"+osArch+".tar.gz") || !strings.Contains(p.URI, "/download/VERSION/") {
			t.Errorf("%s: uri %q is not its release archive", osArch, p.URI)
		}
		if p.Sha256 != "SHA256_"+strings.ToUpper(osArch) || p.Bin != pluginBinary {
			t.Errorf("%s: sha256 %q, bin %q", osArch, p.Sha256, p.Bin)
		}
	}
	if want := map[string]bool{"linux_amd64": true, "linux_arm64": true, "darwin_amd64": true, "darwin_arm64": true}; !maps.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}
}
