package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/interlink-hq/shadowgate/inject"
)

// renderList runs render -o json and decodes the v1 List it prints.
func renderList(t *testing.T, stdin string, args ...string) []unstructured.Unstructured {
	t.Helper()
	code, out, errOut := runCLI(t, stdin, append([]string{"render", "--policy", examplePolicy, "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON([]byte(out)); err != nil {
		t.Fatalf("not a v1 List: %v\n%s", err, out)
	}
	if list.GetAPIVersion() != "v1" || list.GetKind() != "List" {
		t.Fatalf("printed a %s %s, want a v1 List", list.GetAPIVersion(), list.GetKind())
	}
	return list.Items
}

func kindsAndNames(items []unstructured.Unstructured) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.GetKind()+" "+it.GetNamespace()+"/"+it.GetName())
	}
	return out
}

func TestRenderTheNotebookInEachMode(t *testing.T) {
	example, err := os.ReadFile(notebook)
	if err != nil {
		t.Fatal(err)
	}
	for sentence, tc := range map[string]struct {
		node, mode string
		init, main []string
	}{
		// NodeDiscovery slurm, the default: the wait-reason sidecar carries what Slurm says of
		// the queued job.
		"hpc-vk: portforward with a public key": {"hpc-vk", "portforward", []string{"wait-reason", "wait-for-node"}, []string{"ssh-forward"}},
		// wait-for-node logs in to ask Slurm, so kinit comes first.
		"cern-vk: exec with Kerberos": {"cern-vk", "exec", []string{"kinit", "wait-reason", "wait-for-node"}, []string{"ssh-forward", "krb-refresh"}},
	} {
		t.Run(sentence, func(t *testing.T) {
			pod := strings.ReplaceAll(string(example), "hpc-vk", tc.node)
			items := renderList(t, pod, "-f", "-")
			want := []string{"Pod user/notebook", "Namespace /user-shadow", "ConfigMap user-shadow/notebook-user-node", "Service user-shadow/notebook-user", "NetworkPolicy user-shadow/notebook-user", "Deployment user-shadow/notebook-user"}
			if got := kindsAndNames(items); !slices.Equal(got, want) {
				t.Fatalf("objects %q, want %q", got, want)
			}
			var d appsv1.Deployment
			if err := json.Unmarshal(mustJSON(t, items[len(items)-1].Object), &d); err != nil {
				t.Fatal(err)
			}
			var initNames, names []string
			for _, c := range d.Spec.Template.Spec.InitContainers {
				initNames = append(initNames, c.Name)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				names = append(names, c.Name)
				for _, e := range c.Env {
					if e.Name == inject.EnvForwardMode && e.Value != tc.mode {
						t.Errorf("%s mode, want %s", e.Value, tc.mode)
					}
				}
			}
			if !slices.Equal(initNames, tc.init) || !slices.Equal(names, tc.main) {
				t.Errorf("containers init %v main %v, want %v %v", initNames, names, tc.init, tc.main)
			}
		})
	}
}

func TestRenderYAMLPrintsTheSameObjectsAsJSON(t *testing.T) {
	items := renderList(t, "", "-f", notebook)
	code, out, _ := runCLI(t, "", "render", "--policy", examplePolicy, "-f", notebook)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for i := 0; ; i++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if i != len(items) {
				t.Fatalf("YAML has %d documents, JSON %d items (%v)", i, len(items), err)
			}
			return
		}
		if !bytes.Equal(mustJSON(t, obj), mustJSON(t, items[i].Object)) {
			t.Errorf("document %d differs between -o yaml and -o json", i)
		}
	}
}

func TestRenderARefusedPodPrintsChecksMessages(t *testing.T) {
	code, out, errOut := runCLI(t, "", "render", "--policy", examplePolicy, "-f", refused)
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	_, checkOut, _ := runCLI(t, "", "check", "--policy", examplePolicy, "-f", refused)
	if errOut != checkOut {
		t.Errorf("stderr:\n%s\nwant check's output:\n%s", errOut, checkOut)
	}
}

func TestRenderAPodWithoutAShadowPrintsOnlyThePod(t *testing.T) {
	example, err := os.ReadFile(notebook)
	if err != nil {
		t.Fatal(err)
	}
	pod := strings.Replace(string(example), "    ports:\n    - containerPort: 8888\n      name: notebook\n", "", 1)
	if got := kindsAndNames(renderList(t, pod, "-f", "-")); !slices.Equal(got, []string{"Pod user/notebook"}) {
		t.Errorf("objects %q, want the Pod alone", got)
	}
}

func TestRenderWarnsOnStderr(t *testing.T) {
	example, err := os.ReadFile(notebook)
	if err != nil {
		t.Fatal(err)
	}
	pod := strings.Replace(string(example), "      name: notebook\n", "      name: notebook\n    - containerPort: 5353\n      protocol: UDP\n", 1)
	code, out, errOut := runCLI(t, pod, "render", "--policy", examplePolicy, "-f", "-")
	if code != 0 || !strings.Contains(errOut, "Warning: spec.containers[0].ports[1]: container \"jupyter\" port 5353/UDP is skipped") {
		t.Errorf("exit %d, stderr %q; want 0 and the UDP warning", code, errOut)
	}
	if _, shadow, _ := strings.Cut(out, "\n---\n"); strings.Contains(shadow, "5353") {
		t.Errorf("the UDP port reached the shadow objects")
	}
}

// frontDoorCase is the policy file and the Pod of inject's front-door-ingress case, the Pod
// without its metadata.uid.
func frontDoorCase(t *testing.T) (policyFile, pod string) {
	t.Helper()
	data, err := os.ReadFile("../../inject/testdata/front-door-ingress.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pol, pod, ok := strings.Cut(string(data), "\n---\n")
	if !ok || !strings.Contains(pod, frontDoorUIDLine) {
		t.Fatal("inject/testdata/front-door-ingress.yaml is no longer a policy, ---, and a Pod with a metadata.uid")
	}
	policyFile = filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	return policyFile, strings.Replace(pod, frontDoorUIDLine, "", 1)
}

const frontDoorUIDLine = "  uid: 3f2b8c4e-9d1a-4f6b-8e2c-7a5d0c1b9e42\n"

// The shadow's pod-uid label and the front door's hosts are computed from the pod's UID: from
// --pod-uid or the Pod's metadata.uid, and without either render warns that they are not the
// pod's.
func TestRenderComputesHostsFromThePodUID(t *testing.T) {
	policyFile, pod := frontDoorCase(t)
	const uid = "3f2b8c4e-9d1a-4f6b-8e2c-7a5d0c1b9e42"
	for sentence, tc := range map[string]struct {
		pod      string
		args     []string
		wantUID  string
		wantWarn bool
	}{
		"Without metadata.uid or --pod-uid it warns that the label and the hosts are not the pod's.": {pod: pod, wantWarn: true},
		"With --pod-uid they are that UID's.":                                                        {pod: pod, args: []string{"--pod-uid", "0b1c"}, wantUID: "0b1c"},
		"With the Pod's metadata.uid they are its.":                                                  {pod: strings.Replace(pod, "  namespace: user\n", "  namespace: user\n"+frontDoorUIDLine, 1), wantUID: uid},
		"With both, the same, they are that UID's.":                                                  {pod: strings.Replace(pod, "  namespace: user\n", "  namespace: user\n"+frontDoorUIDLine, 1), args: []string{"--pod-uid", uid}, wantUID: uid},
	} {
		t.Run(sentence, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.pod, append([]string{"render", "--policy", policyFile, "-f", "-", "-o", "json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, errOut)
			}
			warned := strings.Contains(errOut, "Warning: the Pod has no metadata.uid: its shadow's interlink.eu/pod-uid label is empty and its front door's hosts, which hash the UID, are not the ones the pod will have")
			if warned != tc.wantWarn {
				t.Errorf("stderr %q; want the warning on the UID: %v", errOut, tc.wantWarn)
			}
			var list unstructured.UnstructuredList
			if err := list.UnmarshalJSON([]byte(out)); err != nil {
				t.Fatal(err)
			}
			var label string
			var hosts []string
			for _, it := range list.Items {
				switch it.GetKind() {
				case "Deployment":
					label = it.GetLabels()[inject.LabelPodUID]
				case "Ingress":
					rules, _, _ := unstructured.NestedSlice(it.Object, "spec", "rules")
					for _, r := range rules {
						hosts = append(hosts, r.(map[string]any)["host"].(string))
					}
				}
			}
			wantHosts := []string{inject.FrontDoorHost("notebook", "user", types.UID(tc.wantUID), 8888, "apps.example.org"),
				inject.FrontDoorHost("notebook", "user", types.UID(tc.wantUID), 6006, "apps.example.org")}
			if label != tc.wantUID || !slices.Equal(hosts, wantHosts) {
				t.Errorf("pod-uid label %q and hosts %q, want %q and %q", label, hosts, tc.wantUID, wantHosts)
			}
		})
	}
}

func TestRenderUsageErrors(t *testing.T) {
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {selector: {}, template: {}}\n"
	for sentence, tc := range map[string]struct {
		stdin string
		args  []string
	}{
		"two Pods":                       {"", []string{"-f", notebook, "-f", notebook}},
		"a Deployment":                   {deployment, []string{"-f", "-"}},
		"a Pod with only a generateName": {"apiVersion: v1\nkind: Pod\nmetadata: {generateName: nb-}\nspec: {containers: []}\n", []string{"-f", "-"}},
		"an output format other than yaml or json": {"", []string{"-f", notebook, "-o", "text"}},
		"a --pod-uid that is no UID":               {"", []string{"-f", notebook, "--pod-uid", "a b"}},
		"a --pod-uid other than the Pod's metadata.uid": {strings.Replace(notebookPod(t), "  namespace: user\n", "  namespace: user\n  uid: one\n", 1),
			[]string{"-f", "-", "--pod-uid", "two"}},
	} {
		t.Run(sentence, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.stdin, append([]string{"render", "--policy", examplePolicy}, tc.args...)...)
			if code != 2 || !strings.HasPrefix(errOut, "error: ") {
				t.Errorf("exit %d, stderr %q; want 2 and an error", code, errOut)
			}
		})
	}
}

// notebookPod is the example notebook's manifest.
func notebookPod(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(notebook)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestShadowDocShowsRealRenderOutput keeps the render example of docs/shadow.md true: its
// lines, apart from the … that mark cut script bodies, are the command's output in order.
func TestShadowDocShowsRealRenderOutput(t *testing.T) {
	readme, err := os.ReadFile("../../docs/shadow.md")
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "$ shadowgate render --policy manifests/examples/policy.yaml -f manifests/examples/notebook.yaml\n"
	_, block, ok := strings.Cut(string(readme), prompt)
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatalf("docs/shadow.md has no console block starting %q", prompt)
	}
	_, out, _ := runCLI(t, "", "render", "--policy", examplePolicy, "-f", notebook)
	real := strings.Split(out, "\n")
	i := 0
	for _, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		if strings.TrimSpace(line) == "…" {
			continue
		}
		for i < len(real) && real[i] != line {
			i++
		}
		if i == len(real) {
			t.Fatalf("docs/shadow.md shows %q, which render does not print there; update the example", line)
		}
		i++
	}
}
