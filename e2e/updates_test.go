package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// A workload stored under one policy lives on under a stricter one: an update that leaves
// its pod template as it is (scaling, a label, a finalizer removed by its owner or the garbage
// collector) is admitted, and so is anything done to it while it is being deleted; a change to
// the template is judged by the policy in force and refused with the template's field path.
func TestUpdateLeavingTheTemplateAloneIsAdmittedAfterThePolicyTightens(t *testing.T) {
	createNamespaces(t, "updates")
	// Registered first, so it runs after the restore: later tests count on SOCKS on cern-vk.
	t.Cleanup(func() {
		p := offloaded{name: "socks-probe", namespace: "updates", node: "cern-vk", annotations: map[string]string{socks: "1080"}}
		eventually(t, 30*time.Second, "the example policy is in force again", func() (bool, string) {
			r := kubectl(t, p.json(), "create", "--dry-run=server", "-f", "-")
			return r.Err == nil, r.Output()
		})
	})
	restoreExamplePolicy(t)
	// cern-vk allows SOCKS in the example policy; a finalizer keeps the Deployment
	// Terminating once deleted, as a foreground or orphan delete does until the garbage
	// collector removes its finalizer (this cluster runs no garbage collector).
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata: {name: crawlers, namespace: updates, finalizers: [example.com/hold]}
spec:
  replicas: 1
  selector: {matchLabels: {app: crawler}}
  template:
    metadata:
      labels: {app: crawler}
      annotations: {interlink.eu/reverse-socks-port: "1080"}
    spec:
      nodeSelector: {kubernetes.io/hostname: cern-vk}
      tolerations: [{key: virtual-node.interlink/no-schedule, operator: Exists}]
      containers: [{name: crawl, image: busybox}]
`
	r := kubectl(t, deployment, "apply", "-f", "-")
	if r.Err != nil {
		t.Fatalf("the Deployment was refused under the example policy: %v\n%s", r.Err, r.Output())
	}
	expectContains(t, r.Stderr, "Warning: spec.template.metadata.annotations[interlink.eu/reverse-socks-port]: the SOCKS5 proxy on port 1080")
	// Whatever fails below, the Deployment must not stay Terminating in the shared cluster.
	t.Cleanup(func() {
		kubectl(t, "", "patch", "deployment", "crawlers", "-n", "updates", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	})

	// The admin tightens the policy: cern-vk no longer allows SOCKS.
	example, err := os.ReadFile(exampleFile("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const allowed = "              AllowSocks: true\n"
	if !strings.Contains(string(example), allowed) {
		t.Fatalf("the example policy no longer allows SOCKS on cern-vk as %q; the test is wrong", allowed)
	}
	mustKubectl(t, strings.Replace(string(example), allowed, "              AllowSocks: false\n", 1), "apply", "-f", "-")
	const refusal = `spec.template.metadata.annotations[interlink.eu/reverse-socks-port]: Forbidden: `
	newImage := []string{"set", "image", "deployment/crawlers", "-n", "updates", "crawl=busybox:1.37"}
	eventually(t, 30*time.Second, "the new policy refuses the template", func() (bool, string) {
		r := kubectl(t, "", append(newImage, "--dry-run=server")...)
		return r.Err != nil && strings.Contains(r.Stderr, refusal), r.Output()
	})

	// kubectl scale writes the scale subresource, which the webhook configuration does not
	// send; the others write the Deployment itself, as `kubectl apply` of a new replica count,
	// `kubectl label` and the controllers do, and are sent to /validate-workloads, which admits
	// them and says, as a warning, that the template is refused now, and so its new pods.
	// Every step leaves the Deployment with 2 replicas, so their order does not matter.
	reapplied := strings.Replace(deployment, "replicas: 1", "replicas: 2", 1)
	for sentence, step := range map[string]struct {
		stdin string
		args  []string
		sent  bool
	}{
		"scaling it is admitted":                    {args: []string{"scale", "deployment/crawlers", "-n", "updates", "--replicas=2"}},
		"setting its replicas is admitted":          {sent: true, args: []string{"patch", "deployment", "crawlers", "-n", "updates", "--type=merge", "-p", `{"spec":{"replicas":2}}`}},
		"labelling it is admitted":                  {sent: true, args: []string{"label", "deployment", "crawlers", "-n", "updates", "team=physics"}},
		"annotating it is admitted":                 {sent: true, args: []string{"annotate", "deployment", "crawlers", "-n", "updates", "owner=alice"}},
		"adding a finalizer is admitted":            {sent: true, args: []string{"patch", "deployment", "crawlers", "-n", "updates", "--type=json", "-p", `[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/other"}]`}},
		"re-applying the same template is admitted": {sent: true, stdin: reapplied, args: []string{"apply", "-f", "-"}},
	} {
		r := kubectl(t, step.stdin, step.args...)
		if r.Err != nil {
			t.Errorf("%s: refused although the template is unchanged: %v\n%s", sentence, r.Err, r.Output())
			continue
		}
		if step.sent && (!strings.Contains(r.Stderr, "Warning: "+refusal) || !strings.Contains(r.Stderr, "this update is admitted as it leaves the pod template unchanged")) {
			t.Errorf("%s: kubectl printed no warning that the template is refused now:\n%s", sentence, r.Output())
		}
	}
	if got := mustKubectl(t, "", "get", "deployment", "crawlers", "-n", "updates", "-o", "jsonpath={.spec.replicas} {.metadata.labels.team}"); got != "2 physics" {
		t.Errorf("replicas and label %q, want %q", got, "2 physics")
	}

	// A change to the template is judged, and refused with its path, whatever part changed.
	r = kubectl(t, "", newImage...)
	if r.Err == nil {
		t.Fatalf("a template change was admitted under a policy that refuses the template; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, `Deployment.apps "crawlers" is invalid: `, refusal)

	// Being deleted, it is not judged at all: the change that was just refused is admitted, and
	// the finalizer's removal lets it go.
	mustKubectl(t, "", "delete", "deployment", "crawlers", "-n", "updates", "--wait=false")
	if r := kubectl(t, "", newImage...); r.Err != nil {
		t.Errorf("a template change of a Deployment being deleted was refused: %v\n%s", r.Err, r.Output())
	}
	mustKubectl(t, "", "patch", "deployment", "crawlers", "-n", "updates", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	eventually(t, 15*time.Second, "the Deployment is gone once its finalizer is removed", func() (bool, string) {
		ok, out := exists(t, "deployment", "crawlers", "-n", "updates")
		return !ok, out
	})
}

// A Secret's type cannot change, so a copy made of the source when it had another type is not
// overwritten: the pod is refused with what to do, and once the copy is deleted as it says,
// the pod is admitted and the copy made again with the source's type. (The copy here is
// written by hand, marked as shadowgate marks its copies, rather than by recreating the
// suite's source with another type.)
func TestCredentialCopyOfAnotherTypeIsRefusedWithTheRemedy(t *testing.T) {
	createNamespaces(t, "retyped")
	handOverShadowNamespaces(t, "retyped")
	mustKubectl(t, `apiVersion: v1
kind: Secret
metadata:
  name: hpc-ssh-key
  namespace: retyped-shadow
  annotations: {interlink.eu/replicated-from: shadowgate-system/hpc-ssh-key}
type: kubernetes.io/ssh-auth
stringData: {ssh-privatekey: "an older key"}
`, "create", "-f", "-")
	if got := mustKubectl(t, "", "get", "secret", "hpc-ssh-key", "-n", "shadowgate-system", "-o", "jsonpath={.type}"); got != "Opaque" {
		t.Fatalf("the suite's source is of type %q, not Opaque; the test is wrong", got)
	}
	p := offloaded{name: "trainer", namespace: "retyped", node: "hpc-vk", ports: []int32{8888}}
	r := kubectl(t, p.json(), "apply", "-f", "-")
	if r.Err == nil {
		t.Fatalf("admitted over a copy of another type; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, "secret retyped-shadow/hpc-ssh-key is a copy of shadowgate-system/hpc-ssh-key of type kubernetes.io/ssh-auth, "+
		"and the source is now of type Opaque; a Secret's type cannot change: "+
		"delete the copy (kubectl delete secret -n retyped-shadow hpc-ssh-key) and shadowgate copies it again")
	if strings.Contains(r.Stderr, "field is immutable") {
		t.Errorf("the API server's refusal of the update reached the user:\n%s", r.Stderr)
	}

	mustKubectl(t, "", "delete", "secret", "-n", "retyped-shadow", "hpc-ssh-key")
	if r := kubectl(t, p.json(), "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("refused once the copy was deleted: %v\n%s", r.Err, r.Output())
	}
	if got := mustKubectl(t, "", "get", "secret", "hpc-ssh-key", "-n", "retyped-shadow", "-o", "jsonpath={.type}"); got != "Opaque" {
		t.Errorf("the copy made again is of type %q, want the source's Opaque", got)
	}
}
