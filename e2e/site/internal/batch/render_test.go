package batch

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

var update = flag.Bool("update", false, "rewrite the golden files from the rendering")

// The node's directories in every golden file.
const (
	goldenWorkDir  = "/var/lib/site/jobs"
	goldenLauncher = "/opt/site/launcher"
)

// TestRenderGolden renders each testdata/<case>.yaml (a pod and the objects it refers to) and
// compares the job directory with testdata/<case>.golden. A golden file without its input
// fails: it would test nothing.
func TestRenderGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs in testdata: %v", err)
	}
	goldens, _ := filepath.Glob("testdata/*.golden")
	for _, g := range goldens {
		if _, err := os.Stat(strings.TrimSuffix(g, ".golden") + ".yaml"); err != nil {
			t.Errorf("%s has no input beside it: remove it", g)
		}
	}
	for _, input := range inputs {
		name := strings.TrimSuffix(filepath.Base(input), ".yaml")
		t.Run(name, func(t *testing.T) {
			in := readInput(t, input)
			job, err := Render(in)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			got := describe(job)
			golden := strings.TrimSuffix(input, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("the rendering differs from %s (go test -update rewrites it):\n%s", golden, got)
			}
			checkScript(t, scriptOf(t, job))
		})
	}
}

// checkScript holds the rendered script to bash's parser and to shellcheck.
func checkScript(t *testing.T, script []byte) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(file, script, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", file).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v\n%s", err, out)
	}
	if out, err := exec.Command("shellcheck", "-s", "bash", file).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

func scriptOf(t *testing.T, job *Job) []byte {
	t.Helper()
	for _, f := range job.Files {
		if f.Path == ScriptFile {
			return f.Data
		}
	}
	t.Fatal("no job script among the files")
	return nil
}

// describe is the golden form of a job directory: the script, then every other file with its
// mode and content, then the notes.
func describe(job *Job) string {
	var b strings.Builder
	for _, f := range job.Files {
		switch {
		case f.Path == ScriptFile:
			fmt.Fprintf(&b, "=== %s %04o\n%s", f.Path, f.Mode, f.Data)
		case f.Dir:
			fmt.Fprintf(&b, "=== %s/ %04o\n", f.Path, f.Mode)
		default:
			fmt.Fprintf(&b, "=== %s %04o\n%s\n", f.Path, f.Mode, f.Data)
		}
	}
	for _, n := range job.Notes {
		fmt.Fprintf(&b, "=== note: %s\n", n)
	}
	return b.String()
}

// readInput decodes a multi-document YAML file: one Pod, and the ConfigMaps and Secrets of its
// namespace.
func readInput(t *testing.T, file string) Input {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objects := objectStore{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	var pod *corev1.Pod
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		switch o := obj.(type) {
		case *corev1.Pod:
			pod = o
		case *corev1.ConfigMap:
			objects.configMaps[o.Name] = o
		case *corev1.Secret:
			objects.secrets[o.Name] = o
		default:
			t.Fatalf("%s: unexpected %T", file, obj)
		}
	}
	if pod == nil {
		t.Fatalf("%s holds no Pod", file)
	}
	return objects.input(pod)
}

type objectStore struct {
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
}

func (o objectStore) input(pod *corev1.Pod) Input {
	return Input{
		Pod:                pod,
		JobDir:             filepath.Join(goldenWorkDir, string(pod.UID)),
		LauncherDir:        goldenLauncher,
		SingularityOptions: strings.Fields(DefaultSingularityOptions),
		ConfigMap: func(name string) (*corev1.ConfigMap, error) {
			if cm, ok := o.configMaps[name]; ok {
				return cm, nil
			}
			return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
		},
		Secret: func(name string) (*corev1.Secret, error) {
			if s, ok := o.secrets[name]; ok {
				return s, nil
			}
			return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
		},
	}
}

// TestRenderRefuses holds pods the script cannot run as asked: each is a refusal (the pod
// fails) naming what is wrong.
func TestRenderRefuses(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "user", UID: "77777777-8888-4999-8aaa-bbbbbbbbbbbb", Annotations: map[string]string{}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"true"}}}},
		}
	}
	cases := map[string]struct {
		change func(*corev1.Pod)
		says   string
	}{
		"shell metacharacters in the flags": {
			func(p *corev1.Pod) { p.Annotations["slurm-job.vk.io/flags"] = "--mem=1G;reboot" },
			"metacharacters",
		},
		"a mount path a bind list would split": {
			func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: "/data,/etc:/x"}}
			},
			"cannot go into a singularity bind list",
		},
		"a subPath that leaves its volume": {
			func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: "/data", SubPath: "../../etc"}}
			},
			"leaves the volume",
		},
		"an env name singularity cannot set": {
			func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "my.var", Value: "x"}} },
			`"my.var" is not a shell name`,
		},
		"a NUL in an argument": {
			func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"a\x00b"} },
			"NUL",
		},
		"a status field not known before the job runs": {
			func(p *corev1.Pod) {
				p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
			},
			"status.podIP is not known",
		},
		"a persistent volume claim": {
			func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
			},
			"materialises only",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			pod := base()
			c.change(pod)
			_, err := Render(objectStore{}.input(pod))
			var refusal *Refusal
			if !errors.As(err, &refusal) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Render = %v, want a refusal saying %q", err, c.says)
			}
		})
	}
}

// TestRenderWaitsForMissingObjects: a ConfigMap not there yet is worth a retry, not a failure.
func TestRenderWaitsForMissingObjects(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "user", UID: "77777777-8888-4999-8aaa-bbbbbbbbbbbb"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"true"}}},
			Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}}}}},
		},
	}
	_, err := Render(objectStore{}.input(pod))
	var refusal *Refusal
	if err == nil || errors.As(err, &refusal) || !apierrors.IsNotFound(errors.Unwrap(err)) {
		t.Fatalf("Render = %v, want the lookup's NotFound, not a refusal", err)
	}
}

// TestRenderCommandPrefix: the job exports no socket directory root of its own; the site's
// CommandPrefix, when it has one, runs before the pod's pre-exec.
func TestRenderCommandPrefix(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "user", UID: "77777777-8888-4999-8aaa-bbbbbbbbbbbb",
			Annotations: map[string]string{"slurm-job.vk.io/pre-exec": "echo pre-exec"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"true"}}}},
	}
	in := objectStore{}.input(pod)
	job, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if script := string(scriptOf(t, job)); strings.Contains(script, "INTERLINK_SOCKET_DIR_ROOT") {
		t.Errorf("without a CommandPrefix the script names INTERLINK_SOCKET_DIR_ROOT:\n%s", script)
	}
	in.CommandPrefix = "export INTERLINK_SOCKET_DIR_ROOT=/scratch/il"
	job, err = Render(in)
	if err != nil {
		t.Fatal(err)
	}
	script := string(scriptOf(t, job))
	prefix, preExec := strings.Index(script, "\n"+in.CommandPrefix+"\n"), strings.Index(script, "\necho pre-exec\n")
	if prefix < 0 || preExec < 0 || prefix > preExec {
		t.Errorf("the CommandPrefix line is not in the script before the pre-exec:\n%s", script)
	}
	checkScript(t, []byte(script))
}
