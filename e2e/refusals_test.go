package e2e

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

const (
	fwd   = validate.AnnotationReverseForwards
	socks = validate.AnnotationReverseSocksPort
	bind  = validate.AnnotationReverseBind
)

// examplePolicy is the policy the suite installs (manifests/examples/policy.yaml).
func examplePolicy(t *testing.T) *policy.Policy {
	t.Helper()
	b, err := os.ReadFile(exampleFile("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pol, errs := policy.Parse(b)
	if len(errs) > 0 {
		t.Fatalf("example policy: %v", errs)
	}
	return pol
}

// Every annotation refusal of the foundation reaches `kubectl apply` as an Invalid status:
// kubectl prints "The Pod "<name>" is invalid:" and one "* <field>: <type>: <value>: <detail>"
// line per error, exactly as validate words it.
func TestRefusalsPrintFieldPathsAtApply(t *testing.T) {
	createNamespaces(t, "refusals")
	pol := examplePolicy(t)
	cases := []struct {
		name, node  string
		annotations map[string]string
		literal     string // one line written out by hand, so the format itself is pinned
	}{
		{"bind-127-0-0-1", "hpc-vk", map[string]string{fwd: "minio:9000", bind: "127.0.0.1"},
			`* metadata.annotations[interlink.eu/reverse-bind]: Invalid value: "127.0.0.1": `},
		{"bind-mapped-loopback", "hpc-vk", map[string]string{fwd: "minio:9000", bind: "::ffff:127.0.0.1"},
			`* metadata.annotations[interlink.eu/reverse-bind]: Invalid value: "::ffff:127.0.0.1": `},
		{"bind-not-loopback", "hpc-vk", map[string]string{fwd: "minio:9000", bind: "10.0.0.5"}, ""},
		{"bind-not-an-address", "hpc-vk", map[string]string{fwd: "minio:9000", bind: "localhost"}, ""},
		{"forward-port-not-a-number", "hpc-vk", map[string]string{fwd: "minio:http"},
			`* metadata.annotations[interlink.eu/reverse-forwards]: Invalid value: `},
		{"forward-port-out-of-range", "hpc-vk", map[string]string{fwd: "minio:99999"}, ""},
		{"forward-host-with-shell", "hpc-vk", map[string]string{fwd: "$(id):9000"}, ""},
		{"forward-too-many-colons", "hpc-vk", map[string]string{fwd: "1:2:minio:9000"}, ""},
		{"forward-privileged-port", "hpc-vk", map[string]string{fwd: "kubernetes.default.svc:443"}, ""},
		{"forward-privileged-listen", "hpc-vk", map[string]string{fwd: "80:web.user.svc:8080"}, ""},
		{"forward-duplicate-listen", "hpc-vk", map[string]string{fwd: "minio:9000 9000:other.ns.svc:80"}, ""},
		{"forward-empty", "hpc-vk", map[string]string{fwd: " "}, ""},
		{"pod-vpn-with-reverse", "hpc-vk", map[string]string{validate.AnnotationPodVPN: "true", fwd: "minio:9000"}, ""},
		{"socks-not-allowed", "hpc-vk", map[string]string{socks: "1080"},
			`* metadata.annotations[interlink.eu/reverse-socks-port]: Forbidden: `},
		{"socks-not-a-number", "cern-vk", map[string]string{socks: "socks"}, ""},
		{"socks-on-a-listen-port", "cern-vk", map[string]string{socks: "9000", fwd: "minio:9000"}, ""},
		{"misspelt-annotation", "hpc-vk", map[string]string{"interlink.eu/reverse-forward": "minio:9000"},
			`* metadata.annotations[interlink.eu/reverse-forward]: Unsupported value: "interlink.eu/reverse-forward": supported values: `},
		{"same-ns-not-a-bool", "hpc-vk", map[string]string{validate.AnnotationShadowSameNS: "yes"}, ""},
		{"extra-port-not-a-number", "hpc-vk", map[string]string{validate.AnnotationExtraPorts: "web"}, ""},
		{"extra-port-unknown-protocol", "hpc-vk", map[string]string{validate.AnnotationExtraPorts: "8080:web:QUIC"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := offloaded{name: c.name, namespace: "refusals", node: c.node, annotations: c.annotations, ports: []int32{8888}}
			want := expectedRefusal(t, p, pol)
			r := kubectl(t, p.json(), "apply", "-f", "-")
			if r.Err == nil {
				t.Fatalf("admitted; kubectl printed:\n%s", r.Output())
			}
			expectContains(t, r.Stderr, append(want, c.literal)...)
			if ok, _ := exists(t, "pod", c.name, "-n", "refusals"); ok {
				t.Error("the refused pod was stored")
			}
		})
	}
}

// expectedRefusal is what kubectl prints for the errors validate finds in the pod.
func expectedRefusal(t *testing.T, p offloaded, pol *policy.Policy) []string {
	t.Helper()
	pod := &corev1.Pod{}
	if err := yaml.Unmarshal([]byte(p.json()), pod); err != nil {
		t.Fatal(err)
	}
	_, d := validate.Pod(pod, pol)
	if d.Allowed() {
		t.Fatalf("validate admits %s; the case is wrong", p.name)
	}
	want := []string{`The Pod "` + p.name + `" is invalid: `}
	for _, e := range d.Errors {
		want = append(want, "* "+e.Error())
	}
	return want
}

// A workload's pod template is judged at apply, with errors under the template's path.
func TestWorkloadWithBadTemplateIsRefusedAtApply(t *testing.T) {
	createNamespaces(t, "workloads")
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata: {name: trainers, namespace: workloads}
spec:
  selector: {matchLabels: {app: trainer}}
  template:
    metadata:
      labels: {app: trainer}
      annotations: {interlink.eu/reverse-forwards: "minio:9000", interlink.eu/reverse-bind: "127.0.0.1"}
    spec:
      nodeSelector: {kubernetes.io/hostname: hpc-vk}
      containers: [{name: train, image: busybox}]
`
	r := kubectl(t, deployment, "apply", "-f", "-")
	if r.Err == nil {
		t.Fatalf("admitted; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, `The Deployment "trainers" is invalid: `,
		`* spec.template.metadata.annotations[interlink.eu/reverse-bind]: Invalid value: "127.0.0.1": `)

	cronJob := `apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: workloads}
spec:
  schedule: "0 2 * * *"
  jobTemplate:
    spec:
      template:
        metadata:
          annotations: {interlink.eu/reverse-socks-port: "1080"}
        spec:
          nodeName: hpc-vk
          restartPolicy: Never
          tolerations: [{key: virtual-node.interlink/no-schedule, operator: Exists}]
          containers: [{name: job, image: busybox}]
`
	r = kubectl(t, cronJob, "apply", "-f", "-")
	if r.Err == nil {
		t.Fatalf("admitted; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, `The CronJob "nightly" is invalid: `,
		`* spec.jobTemplate.spec.template.metadata.annotations[interlink.eu/reverse-socks-port]: Forbidden: `)

	fixed := strings.ReplaceAll(deployment, `, interlink.eu/reverse-bind: "127.0.0.1"`, "")
	expectContains(t, mustKubectl(t, fixed, "apply", "-f", "-"), "deployment.apps/trainers created")
}

// Warnings come back in the admission response and kubectl prints them as "Warning:" lines.
func TestWarningsAreKubectlWarnings(t *testing.T) {
	createNamespaces(t, "warnings")
	p := offloaded{name: "old-annotations", namespace: "warnings", node: "hpc-vk", ports: []int32{8888}, annotations: map[string]string{
		validate.AnnotationReverseOwnerOnly: "false",
		fwd:                                 "minio:9000",
	}}
	r := kubectl(t, p.json(), "apply", "-f", "-")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Output())
	}
	expectContains(t, r.Stderr, "Warning: metadata.annotations[interlink.eu/reverse-owner-only] is ignored: ")
	expectContains(t, r.Stdout, "pod/old-annotations created")

	elsewhere := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"not-offloaded","namespace":"warnings",` +
		`"annotations":{"interlink.eu/reverse-forwards":"minio:9000"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
	r = kubectl(t, elsewhere, "apply", "-f", "-")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Output())
	}
	expectContains(t, r.Stderr, "Warning: metadata.annotations[interlink.eu/reverse-forwards] is ignored: the pod is not placed on a virtual node")
}
