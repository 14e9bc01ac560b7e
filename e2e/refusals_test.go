package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/validate"
)

const (
	fwd   = validate.AnnotationReverseForwards
	socks = validate.AnnotationReverseSocksPort
	bind  = validate.AnnotationReverseBind
)

// Every annotation refusal of the foundation reaches `kubectl apply` as an Invalid status:
// kubectl prints "The Pod "<name>" is invalid:" and one "<field>: <type>: <value>: <detail>"
// line per error, each error and warning exactly as `shadowgate check` reports it.
func TestRefusalsPrintFieldPathsAtApply(t *testing.T) {
	createNamespaces(t, "refusals")
	cases := []struct {
		name, node  string
		annotations map[string]string
		literal     string // one line written out by hand, so the format itself is pinned
	}{
		{"bind-127-0-0-1", "hpc-vk", map[string]string{fwd: "minio:9000", bind: "127.0.0.1"},
			`metadata.annotations[interlink.eu/reverse-bind]: Invalid value: "127.0.0.1": `},
		{"bind-mapped-loopback", "hpc-vk", map[string]string{fwd: "minio:9000", bind: "::ffff:127.0.0.1"},
			`metadata.annotations[interlink.eu/reverse-bind]: Invalid value: "::ffff:127.0.0.1": `},
		{"bind-not-loopback", "hpc-vk", map[string]string{fwd: "minio:9000", bind: "10.0.0.5"}, ""},
		{"bind-not-an-address", "hpc-vk", map[string]string{fwd: "minio:9000", bind: "localhost"}, ""},
		{"forward-port-not-a-number", "hpc-vk", map[string]string{fwd: "minio:http"},
			`metadata.annotations[interlink.eu/reverse-forwards]: Invalid value: `},
		{"forward-port-out-of-range", "hpc-vk", map[string]string{fwd: "minio:99999"}, ""},
		{"forward-host-with-shell", "hpc-vk", map[string]string{fwd: "$(id):9000"}, ""},
		{"forward-too-many-colons", "hpc-vk", map[string]string{fwd: "1:2:minio:9000"}, ""},
		{"forward-privileged-port", "hpc-vk", map[string]string{fwd: "kubernetes.default.svc:443"}, ""},
		{"forward-privileged-listen", "hpc-vk", map[string]string{fwd: "80:web.user.svc:8080"}, ""},
		{"forward-duplicate-listen", "hpc-vk", map[string]string{fwd: "minio:9000 9000:other.ns.svc:80"}, ""},
		{"forward-empty", "hpc-vk", map[string]string{fwd: " "}, ""},
		{"pod-vpn-with-reverse", "hpc-vk", map[string]string{validate.AnnotationPodVPN: "true", fwd: "minio:9000"}, ""},
		{"socks-not-allowed", "hpc-vk", map[string]string{socks: "1080"},
			`metadata.annotations[interlink.eu/reverse-socks-port]: Forbidden: `},
		{"socks-not-a-number", "cern-vk", map[string]string{socks: "socks"}, ""},
		{"socks-on-a-listen-port", "cern-vk", map[string]string{socks: "9000", fwd: "minio:9000"}, ""},
		{"misspelt-annotation", "hpc-vk", map[string]string{"interlink.eu/reverse-forward": "minio:9000"},
			`metadata.annotations[interlink.eu/reverse-forward]: Unsupported value: "interlink.eu/reverse-forward": supported values: `},
		{"same-ns-not-a-bool", "hpc-vk", map[string]string{validate.AnnotationShadowSameNS: "yes"}, ""},
		{"extra-port-not-a-number", "hpc-vk", map[string]string{validate.AnnotationExtraPorts: "web"}, ""},
		{"extra-port-unknown-protocol", "hpc-vk", map[string]string{validate.AnnotationExtraPorts: "8080:web:QUIC"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := offloaded{name: c.name, namespace: "refusals", node: c.node, annotations: c.annotations, ports: []int32{8888}}
			want := expectedRefusal(t, p)
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

// expectedRefusal is what kubectl must print for the pod: each error and a "Warning:" line
// for each warning that `shadowgate check` reports for it with the same
// policy. The webhook and the CLI decide through the same functions; this holds them to it.
func expectedRefusal(t *testing.T, p offloaded) []string {
	t.Helper()
	cmd := exec.Command(cluster.bin, "check", "--policy", exampleFile("policy.yaml"), "-f", "-")
	cmd.Stdin = strings.NewReader(p.json())
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("shadowgate check admits %s or failed (%v); the case is wrong:\n%s", p.name, err, out)
	}
	header := `The Pod "` + p.name + `" is invalid: `
	var errs, want []string
	prefix := "Pod " + p.namespace + "/" + p.name + ": "
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		verdict, ok := strings.CutPrefix(line, prefix)
		if !ok {
			t.Fatalf("unexpected line from shadowgate check: %q", line)
		}
		if warning, isWarning := strings.CutPrefix(verdict, "Warning: "); isWarning {
			want = append(want, "Warning: "+warning)
		} else {
			errs = append(errs, verdict)
		}
	}
	// kubectl puts a single cause on the header line and lists several as "" lines.
	if len(errs) == 1 {
		return append(want, header+errs[0])
	}
	want = append(want, header)
	for _, e := range errs {
		want = append(want, "\n* "+e)
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
		`spec.template.metadata.annotations[interlink.eu/reverse-bind]: Invalid value: "127.0.0.1": `)

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
		`spec.jobTemplate.spec.template.metadata.annotations[interlink.eu/reverse-socks-port]: Forbidden: `)

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
