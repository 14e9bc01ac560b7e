package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

// object is the part of a kubectl -o json object the tests read.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name          string            `json:"name"`
		Namespace     string            `json:"namespace"`
		UID           string            `json:"uid"`
		Labels        map[string]string `json:"labels"`
		Annotations   map[string]string `json:"annotations"`
		ManagedFields []struct {
			Manager   string `json:"manager"`
			Operation string `json:"operation"`
		} `json:"managedFields"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

func getObject(t *testing.T, args ...string) object {
	t.Helper()
	var o object
	out := mustKubectl(t, "", append([]string{"get", "-o", "json", "--show-managed-fields"}, args...)...)
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return o
}

// The guide's trainer and notebook: admitted, mutated, and their shadows exist before the
// pods are stored, server-side applied by the field manager shadowgate (the node ConfigMap
// created by it), with DESIGN.md's labels, and their credentials copied with the marker.
func TestAdmittedPodsHaveTheirShadowsAppliedByShadowgate(t *testing.T) {
	createNamespaces(t, "user")
	out := mustKubectl(t, "", "apply", "-f", exampleFile("trainer.yaml"), "-f", exampleFile("notebook.yaml"))
	expectContains(t, out, "pod/trainer created", "pod/notebook created")

	trainer := getObject(t, "pod", "trainer", "-n", "user")
	if b := trainer.Metadata.Annotations[validate.AnnotationReverseBind]; !strings.HasPrefix(b, "127.") {
		t.Errorf("reverse-bind %q: the webhook records the 127.x.y.z address it chose", b)
	}
	if !strings.Contains(trainer.Metadata.Annotations[validate.AnnotationPreExec], "\n") {
		t.Errorf("no pre-exec snippet prepended: %q", trainer.Metadata.Annotations[validate.AnnotationPreExec])
	}
	notebook := getObject(t, "pod", "notebook", "-n", "user")

	// The virtual kubelet's own names: <pod>-<ns> in <ns>-shadow.
	for _, c := range []struct {
		pod             object
		name, namespace string // the shadow's
		kinds           []string
	}{
		{trainer, "trainer-user", "user-shadow", []string{"deployment", "configmap"}}, // no port: no Service
		{notebook, "notebook-user", "user-shadow", []string{"deployment", "service", "configmap"}},
	} {
		name := c.name
		if got := inject.ShadowName(c.pod.Metadata.Name, "user", c.namespace == "user"); got != name {
			t.Errorf("ShadowName says %q for %s, the virtual kubelet's name is %q", got, c.pod.Metadata.Name, name)
		}
		for _, kind := range c.kinds {
			objName := name
			if kind == "configmap" {
				objName = inject.NodeConfigMapName(name)
			}
			o := getObject(t, kind, objName, "-n", c.namespace)
			what := kind + " " + c.namespace + "/" + objName
			want := map[string]string{inject.LabelManagedBy: "shadowgate", inject.LabelPodUID: c.pod.Metadata.UID}
			if kind == "configmap" {
				want[validate.LabelShadowRole] = validate.ShadowRoleNode
				if v, ok := o.Data[validate.ComputeNodeKey]; !ok || v != "" {
					t.Errorf("%s: compute-node %q (present %v), want an empty key", what, v, ok)
				}
			}
			for k, v := range want {
				if o.Metadata.Labels[k] != v {
					t.Errorf("%s: label %s=%q, want %q", what, k, o.Metadata.Labels[k], v)
				}
			}
			if got := o.Metadata.Annotations[inject.AnnotationShadowFor]; got != "user/"+c.pod.Metadata.Name {
				t.Errorf("%s: shadow-for %q", what, got)
			}
			// The node ConfigMap is created, not applied: once it exists its compute-node is
			// the virtual kubelet's, which no later apply may reset.
			operation := "Apply"
			if kind == "configmap" {
				operation = "Update"
			}
			written := false
			for _, mf := range o.Metadata.ManagedFields {
				written = written || (mf.Manager == "shadowgate" && mf.Operation == operation)
			}
			if !written {
				t.Errorf("%s: not written by field manager shadowgate (operation %s): %+v", what, operation, o.Metadata.ManagedFields)
			}
		}
	}

	for _, c := range []struct{ kind, name, namespace string }{
		{"secret", "hpc-ssh-key", "user-shadow"},
		{"configmap", "hpc-known-hosts", "user-shadow"},
	} {
		o := getObject(t, c.kind, c.name, "-n", c.namespace)
		if got := o.Metadata.Annotations[validate.AnnotationReplicatedFrom]; got != "shadowgate-system/"+c.name {
			t.Errorf("%s %s/%s: replicated-from %q, want shadowgate-system/%s", c.kind, c.namespace, c.name, got, c.name)
		}
	}
	// Nothing of the site's reaches the pods' own namespace, where their authors could read it.
	if ok, out := exists(t, "secret", "hpc-ssh-key", "-n", "user"); ok {
		t.Errorf("the site's key was copied into the pods' namespace: %s", out)
	}
}

// shadowObjectsOfAPod selects a pod's own shadow objects: shadowgate's, less the scripts
// ConfigMap every shadow of the namespace shares.
const shadowObjectsOfAPod = "app.kubernetes.io/managed-by=shadowgate,interlink.eu/shadow-role!=scripts"

// A server-side dry run persists nothing, and still reports what would stop the shadow: here a
// ResourceQuota in the shadow namespace that allows no Deployment. The same pod for real is
// refused with the API server's message, and the shadow objects applied before the failure
// are removed, but not the credential copies nor the scripts ConfigMap.
func TestDryRunPersistsNothingAndReportsShadowErrors(t *testing.T) {
	createNamespaces(t, "dry", "quota")
	handOverShadowNamespaces(t, "quota")
	p := offloaded{name: "trainer", namespace: "dry", node: "hpc-vk", ports: []int32{8888}, annotations: map[string]string{fwd: "minio:9000"}}
	r := kubectl(t, p.json(), "apply", "--dry-run=server", "-f", "-")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Output())
	}
	expectContains(t, r.Output(), "pod/trainer created (server dry run)", "Warning: dry run: the shadow's namespace dry-shadow does not exist yet")
	for _, args := range [][]string{{"pod", "trainer", "-n", "dry"}, {"namespace", "dry-shadow"}} {
		if ok, out := exists(t, args...); ok {
			t.Errorf("a dry run persisted %s", out)
		}
	}

	mustKubectl(t, `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"no-deployments","namespace":"quota-shadow"},`+
		`"spec":{"hard":{"count/deployments.apps":"0"}}}`, "apply", "-f", "-")
	// No controller manager computes quota usage here; record it as the quota controller would.
	mustKubectl(t, "", "patch", "resourcequota", "no-deployments", "-n", "quota-shadow", "--subresource=status", "--type=merge",
		"-p", `{"status":{"hard":{"count/deployments.apps":"0"},"used":{"count/deployments.apps":"0"}}}`)
	q := offloaded{name: "trainer", namespace: "quota", node: "hpc-vk", ports: []int32{8888}, annotations: map[string]string{fwd: "minio:9000"}}
	for _, dryRun := range []string{"--dry-run=server", "--dry-run=none"} {
		r := kubectl(t, q.json(), "apply", dryRun, "-f", "-")
		if r.Err == nil {
			t.Fatalf("%s: admitted despite the quota; kubectl printed:\n%s", dryRun, r.Output())
		}
		expectContains(t, r.Stderr, "the pod's shadow was not applied, so the pod is refused: ",
			"Deployment quota-shadow/"+q.shadowName(), "exceeded quota: no-deployments")
	}
	// The removal runs once the denial is sent.
	eventually(t, 10*time.Second, "the refused pod's shadow objects are removed", func() (bool, string) {
		out := mustKubectl(t, "", "get", "deployments,services,configmaps", "-n", "quota-shadow", "-l", shadowObjectsOfAPod, "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
	// Credential copies and the scripts ConfigMap are shared by every shadow in the
	// namespace: one made for a refused pod may already be mounted by another's, so it stays.
	for _, args := range [][]string{{"secret", "hpc-ssh-key", "-n", "quota-shadow"}, {"configmap", "hpc-known-hosts", "-n", "quota-shadow"},
		{"configmap", inject.ScriptsConfigMap("quota-shadow").Name, "-n", "quota-shadow"}} {
		if ok, out := exists(t, args...); !ok {
			t.Errorf("a shared object was removed with the refused pod's shadow: %s", out)
		}
	}
	if ok, _ := exists(t, "pod", "trainer", "-n", "quota"); ok {
		t.Error("the refused pod was stored")
	}
}

// Credentials: an identical unmarked copy is adopted (marked), a marked one is overwritten, a
// foreign one is refused with the exact message and left untouched.
func TestCredentialReplication(t *testing.T) {
	createNamespaces(t, "adopt", "marked", "foreign")
	handOverShadowNamespaces(t, "adopt", "marked", "foreign")
	source := getObject(t, "secret", "hpc-ssh-key", "-n", "shadowgate-system")
	secret := func(ns string, data map[string]string, annotations map[string]string) string {
		b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
			"metadata": map[string]any{"name": "hpc-ssh-key", "namespace": ns, "annotations": annotations}})
		return string(b)
	}
	other := map[string]string{"id_ed25519": "c29tZW9uZSBlbHNlJ3Mga2V5"} // "someone else's key"
	mustKubectl(t, secret("adopt-shadow", source.Data, nil), "create", "-f", "-")
	mustKubectl(t, secret("marked-shadow", other, map[string]string{validate.AnnotationReplicatedFrom: "shadowgate-system/hpc-ssh-key"}), "create", "-f", "-")
	mustKubectl(t, secret("foreign-shadow", other, nil), "create", "-f", "-")

	for _, ns := range []string{"adopt", "marked"} {
		p := offloaded{name: "trainer", namespace: ns, node: "hpc-vk", ports: []int32{8888}}
		mustKubectl(t, p.json(), "apply", "-f", "-")
		copied := getObject(t, "secret", "hpc-ssh-key", "-n", ns+"-shadow")
		if copied.Metadata.Annotations[validate.AnnotationReplicatedFrom] != "shadowgate-system/hpc-ssh-key" {
			t.Errorf("%s-shadow: not marked: %v", ns, copied.Metadata.Annotations)
		}
		if copied.Data["id_ed25519"] != source.Data["id_ed25519"] {
			t.Errorf("%s-shadow: holds %q, not the source's content", ns, copied.Data["id_ed25519"])
		}
	}

	p := offloaded{name: "trainer", namespace: "foreign", node: "hpc-vk", ports: []int32{8888}}
	r := kubectl(t, p.json(), "apply", "-f", "-")
	if r.Err == nil {
		t.Fatalf("admitted over a foreign Secret; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, "refusing to overwrite secret foreign-shadow/hpc-ssh-key: it already exists, holds different content and was not created by shadowgate")
	kept := getObject(t, "secret", "hpc-ssh-key", "-n", "foreign-shadow")
	if kept.Data["id_ed25519"] != other["id_ed25519"] || kept.Metadata.Annotations[validate.AnnotationReplicatedFrom] != "" {
		t.Errorf("the foreign Secret was changed: %+v", kept)
	}
	eventually(t, 10*time.Second, "the refused pod's shadow objects are removed", func() (bool, string) {
		out := mustKubectl(t, "", "get", "deployments,services,configmaps", "-n", "foreign-shadow", "-l", shadowObjectsOfAPod, "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
}

// A node ConfigMap's compute-node reaches ssh: a value smuggling an option is refused with its
// field path, a hostname passes. The matchCondition not-shadowgate-or-compute-node spares only
// those of shadowgate's own writes that cannot carry a node: the same value written as its
// ServiceAccount is refused too, and so is a compute-node in binaryData, which a volume mounts
// as the same file.
func TestNodeConfigMapRefusesSmuggledSSHOptions(t *testing.T) {
	createNamespaces(t, "nodecm")
	p := offloaded{name: "trainer", namespace: "nodecm", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, p.json(), "apply", "-f", "-")
	cm := inject.NodeConfigMapName(p.shadowName())
	patch := func(node string) string { return `{"data":{"compute-node":"` + node + `"}}` }

	r := kubectl(t, "", "patch", "configmap", cm, "-n", p.shadowNamespace(), "--type=merge", "-p", patch("node07 -oProxyCommand=touch /tmp/pwned"))
	if r.Err == nil {
		t.Fatalf("the patch was admitted; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, `The ConfigMap "`+cm+`" is invalid: `,
		`data[compute-node]: Invalid value: "node07 -oProxyCommand=touch /tmp/pwned": `)

	asShadowgate := func(stdin string, args ...string) harness.Result {
		t.Helper()
		r := kubectlAs(t, cluster.cp.ShadowgateKubeconfig, stdin, args...)
		if strings.Contains(r.Stderr, " is forbidden: User ") {
			t.Fatalf("RBAC forbids shadowgate's ServiceAccount to run kubectl %s, so its webhook was never asked: grant it in manifests/base/rbac.yaml; kubectl printed:\n%s", strings.Join(args, " "), r.Output())
		}
		return r
	}
	r = asShadowgate("", "patch", "configmap", cm, "-n", p.shadowNamespace(), "--type=merge", "-p", patch("node07 -oProxyCommand=id"))
	if r.Err == nil {
		t.Errorf("a compute node smuggling an ssh option was stored when written as shadowgate; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, `data[compute-node]: Invalid value: "node07 -oProxyCommand=id": `)
	if r := asShadowgate("", "label", "configmap", cm, "-n", p.shadowNamespace(), "example.org/relabelled=yes"); r.Err != nil {
		t.Errorf("shadowgate could not relabel the node ConfigMap; kubectl printed:\n%s", r.Output())
	}

	// Marked as a shadow's, so the least-privilege policy lets shadowgate write it and the
	// webhook is the one that judges it.
	binary := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"binary-node","namespace":"` + p.shadowNamespace() +
		`","labels":{"app.kubernetes.io/managed-by":"shadowgate","interlink.eu/pod-uid":"binary"}},"binaryData":{"compute-node":"bm9kZTA3"}}`
	r = asShadowgate(binary, "create", "-f", "-")
	if r.Err == nil {
		t.Errorf("a compute node in binaryData was stored; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, `binaryData[compute-node]: Invalid value: "node07": `, "under data[compute-node] instead")

	expectContains(t, mustKubectl(t, "", "patch", "configmap", cm, "-n", p.shadowNamespace(), "--type=merge", "-p", patch("node07.cluster.local")),
		"configmap/"+cm+" patched")
}

// computeNodeOwners reads a node ConfigMap's compute-node and the field managers that own it.
func computeNodeOwners(t *testing.T, name, namespace string) (string, []string) {
	t.Helper()
	var cm struct {
		Metadata struct {
			ManagedFields []struct {
				Manager  string          `json:"manager"`
				FieldsV1 json.RawMessage `json:"fieldsV1"`
			} `json:"managedFields"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	out := mustKubectl(t, "", "get", "configmap", name, "-n", namespace, "-o", "json", "--show-managed-fields")
	if err := json.Unmarshal([]byte(out), &cm); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var owners []string
	for _, mf := range cm.Metadata.ManagedFields {
		var fields struct {
			Data map[string]json.RawMessage `json:"f:data"`
		}
		if err := json.Unmarshal(mf.FieldsV1, &fields); err != nil {
			t.Fatalf("%v\n%s", err, mf.FieldsV1)
		}
		if _, ok := fields.Data["f:"+validate.ComputeNodeKey]; ok {
			owners = append(owners, mf.Manager)
		}
	}
	return cm.Data[validate.ComputeNodeKey], owners
}

// Once the node ConfigMap exists its compute-node is the virtual kubelet's: neither the
// reconciler re-applying a shadow nor a second admission of the same pod (same UID: the API
// server calls the webhook again when an answer was lost on the way) resets the value or
// takes the field. A pod created again under the same name is another pod, with a UID of its
// own: TestAPodCreatedAgainUnderItsNameDoesNotInheritTheEarlierPodsComputeNode.
func TestShadowReappliesKeepTheComputeNodeTheVirtualKubeletWrote(t *testing.T) {
	createNamespaces(t, "vknode", "vkagain")
	const vk = "interlink-virtual-kubelet"
	reportNode := func(p offloaded) string {
		cm := inject.NodeConfigMapName(p.shadowName())
		mustKubectl(t, "", "patch", "configmap", cm, "-n", p.shadowNamespace(), "--type=merge", "--field-manager="+vk,
			"-p", `{"data":{"compute-node":"node07.cluster.local"}}`)
		return cm
	}
	expectKept := func(p offloaded, cm, after string) {
		t.Helper()
		node, owners := computeNodeOwners(t, cm, p.shadowNamespace())
		if node != "node07.cluster.local" || len(owners) != 1 || owners[0] != vk {
			t.Errorf("after %s: compute-node %q owned by %v, want node07.cluster.local owned by %s alone", after, node, owners, vk)
		}
	}

	live := offloaded{name: "trainer", namespace: "vknode", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, live.json(), "apply", "-f", "-")
	cm := reportNode(live)
	uid := func() string {
		return mustKubectl(t, "", "get", "deployment", live.shadowName(), "-n", live.shadowNamespace(), "-o", "jsonpath={.metadata.uid}")
	}
	before := uid()
	mustKubectl(t, "", "delete", "deployment", live.shadowName(), "-n", live.shadowNamespace())
	eventually(t, gracePeriod/2, "the reconciler re-applies the shadow Deployment", func() (bool, string) {
		ok, out := exists(t, "deployment", live.shadowName(), "-n", live.shadowNamespace())
		return ok && uid() != before, out
	})
	expectKept(live, cm, "the reconciler's re-apply")

	// The API server's call again, with the same request, before the pod is stored: a stored
	// pod's name is refused as taken.
	again := offloaded{name: "trainer", namespace: "vkagain", node: "hpc-vk", ports: []int32{8888}}
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(again.json()), &pod); err != nil {
		t.Fatal(err)
	}
	pod.UID = "6c1d9e2a-4b7f-4e3a-8d5c-1f2a3b4c5d6e"
	raw, _ := json.Marshal(pod) // a typed Pod always marshals
	for call := range 2 {
		r, err := cluster.sg.Review("/validate-pods", 10*time.Second, "application/json", harness.PodCreateReview("lost-answer", again.namespace, again.name, raw))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Allowed {
			t.Fatalf("call %d of the admission was refused: %+v", call+1, r.Result)
		}
		if call == 0 {
			cm = reportNode(again)
		}
	}
	expectKept(again, cm, "a second admission of the same pod")
}

// A pod deleted and created again under its name (a StatefulSet's, `kubectl replace --force`)
// before the reconciler removed the earlier pod's shadow finds that pod's node ConfigMap,
// holding the node the earlier job ran on. The new shadow resets it to empty under the new
// pod's UID, so it waits for its own job's node instead of forwarding at once to a node that
// job has left, maybe running another user's job. The reconciler deletes a deleted pod's
// shadow at once, too soon for a test to come first: the ConfigMap is created as that race
// leaves it, with the earlier pod's UID and the node the virtual kubelet wrote.
func TestAPodCreatedAgainUnderItsNameDoesNotInheritTheEarlierPodsComputeNode(t *testing.T) {
	createNamespaces(t, "reborn")
	handOverShadowNamespaces(t, "reborn")
	p := offloaded{name: "worker-0", namespace: "reborn", node: "hpc-vk", ports: []int32{8888}}
	cm := inject.NodeConfigMapName(p.shadowName())
	left, _ := json.Marshal(corev1.ConfigMap{ // a typed ConfigMap always marshals
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: p.shadowNamespace(),
			Labels: map[string]string{inject.LabelManagedBy: "shadowgate", validate.LabelShadowRole: validate.ShadowRoleNode,
				inject.LabelPodUID: "0f5b2c1e-7a3d-4c8e-9b6f-2d4e8a1c3b57"}, // the earlier pod's
			Annotations: map[string]string{inject.AnnotationShadowFor: p.namespace + "/" + p.name}},
		Data: map[string]string{validate.ComputeNodeKey: "node042"},
	})
	mustKubectl(t, string(left), "create", "--field-manager=interlink-virtual-kubelet", "-f", "-")

	mustKubectl(t, p.json(), "create", "-f", "-")
	podUID := mustKubectl(t, "", "get", "pod", p.name, "-n", p.namespace, "-o", "jsonpath={.metadata.uid}")
	o := getObject(t, "configmap", cm, "-n", p.shadowNamespace())
	if node, ok := o.Data[validate.ComputeNodeKey]; !ok || node != "" {
		t.Errorf("compute-node %q (present %v): want it reset to empty, not the earlier pod's node", node, ok)
	}
	if uid := o.Metadata.Labels[inject.LabelPodUID]; uid != podUID {
		t.Errorf("pod-uid %q, want the new pod's %s", uid, podUID)
	}
}

// `kubectl create` of a pod whose name is taken is refused before its shadow is applied: the
// live pod's shadow keeps its pod's UID, and is not touched.
func TestCreatingATakenPodNameLeavesTheLivePodsShadowAlone(t *testing.T) {
	createNamespaces(t, "taken")
	p := offloaded{name: "trainer", namespace: "taken", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, p.json(), "create", "-f", "-")
	podUID := mustKubectl(t, "", "get", "pod", p.name, "-n", p.namespace, "-o", "jsonpath={.metadata.uid}")
	shadow := func() string {
		return mustKubectl(t, "", "get", "deployment", p.shadowName(), "-n", p.shadowNamespace(),
			"-o", `jsonpath={.metadata.resourceVersion} {.metadata.labels.interlink\.eu/pod-uid}`)
	}
	before := shadow()
	if !strings.HasSuffix(before, " "+podUID) {
		t.Fatalf("shadow %q does not carry the pod's UID %s", before, podUID)
	}
	again := p
	again.ports = []int32{9999}
	r := kubectl(t, again.json(), "create", "-f", "-")
	if r.Err == nil {
		t.Fatalf("a second pod of the same name was created; kubectl printed:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, "AlreadyExists", `pods "trainer" already exists`)
	if after := shadow(); after != before {
		t.Errorf("the live pod's shadow changed: resourceVersion and pod-uid %q, were %q", after, before)
	}
}

// Each replica applies a shadow namespace at most once a minute; one deleted within that
// minute is applied again by the next pod's write that finds it gone, and that pod's shadow
// is complete, its scripts ConfigMap (remembered as applied within the minute too) included. There is no namespace controller here: the test empties the namespace and
// finalizes it, as the controller would.
func TestShadowNamespaceDeletedWithinTheMinuteComesBackWithTheNextShadow(t *testing.T) {
	createNamespaces(t, "nsgone")
	first := offloaded{name: "first", namespace: "nsgone", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, first.json(), "apply", "-f", "-")
	applied := time.Now()
	shadowNS := first.shadowNamespace()
	mustKubectl(t, "", "delete", "pod", first.name, "-n", first.namespace)
	eventually(t, gracePeriod/3, "the first pod's shadow is deleted", func() (bool, string) {
		ok, out := exists(t, "deployment", first.shadowName(), "-n", shadowNS)
		return !ok, out
	})
	mustKubectl(t, "", "delete", "deployments,services,configmaps,secrets", "--all", "-n", shadowNS)
	mustKubectl(t, "", "delete", "namespace", shadowNS, "--wait=false")
	mustKubectl(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+shadowNS+`"},"spec":{"finalizers":[]}}`,
		"replace", "--raw", "/api/v1/namespaces/"+shadowNS+"/finalize", "-f", "-")
	eventually(t, 10*time.Second, "the shadow namespace is gone", func() (bool, string) {
		ok, out := exists(t, "namespace", shadowNS)
		return !ok, out
	})

	second := offloaded{name: "second", namespace: "nsgone", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, second.json(), "apply", "-f", "-")
	if since := time.Since(applied); since >= time.Minute {
		t.Fatalf("the second pod came %s after the first: shadowgate had forgotten the namespace anyway, so this proves nothing", since.Round(time.Second))
	}
	for _, obj := range [][]string{
		{"namespace", shadowNS},
		{"configmap", inject.NodeConfigMapName(second.shadowName()), "-n", shadowNS},
		{"service", second.shadowName(), "-n", shadowNS},
		{"secret", "hpc-ssh-key", "-n", shadowNS},
		// Remembered as applied too, and forgotten with the namespace.
		{"configmap", inject.ScriptsConfigMap(shadowNS).Name, "-n", shadowNS},
		{"deployment", second.shadowName(), "-n", shadowNS},
	} {
		if ok, out := exists(t, obj...); !ok {
			t.Errorf("no %s %s once the shadow namespace had been deleted: %s", obj[0], obj[1], out)
		}
	}
}

// What /mutate-pods does to pods its matchCondition offloaded-pod sends, through the real API
// server: a stale snippet block comes out of a pre-exec that asks for no tunnel, and a SOCKS
// port alone, on cern-vk which allows it, is a reverse tunnel to prepare. The marker lines are
// inject's (preexec.go), repeated here as a user would see them.
func TestMutatingWebhookPreparesThePodsItsConditionSends(t *testing.T) {
	const (
		begin = "# >>> shadowgate: reverse tunnel (added by the admission webhook; do not edit) >>>"
		end   = "# <<< shadowgate: reverse tunnel <<<"
	)
	createNamespaces(t, "mutated")
	for sentence, c := range map[string]struct {
		pod   offloaded
		check func(preExec, bind string) string // what is wrong, or ""
	}{
		"a stale snippet block is taken out of a pre-exec that asks for no tunnel": {
			pod: offloaded{name: "stale", namespace: "mutated", node: "hpc-vk", annotations: map[string]string{
				validate.AnnotationPreExec: begin + "\necho an older snippet\n" + end + "\nmodule load cuda\n"}},
			check: func(preExec, bind string) string {
				if preExec != "module load cuda\n" || bind != "" {
					return "want the user's pre-exec alone and no bind address"
				}
				return ""
			},
		},
		"a SOCKS port alone on a node that allows it gets the snippet and a bind address": {
			pod: offloaded{name: "socks-only", namespace: "mutated", node: "cern-vk", annotations: map[string]string{socks: "1080"}},
			check: func(preExec, bind string) string {
				if strings.Count(preExec, begin) != 1 || !strings.Contains(preExec, "'"+bind+"'") || !strings.HasPrefix(bind, "127.") {
					return "want one snippet block calling the snippet with a recorded 127.x bind address"
				}
				return ""
			},
		},
	} {
		t.Run(sentence, func(t *testing.T) {
			mustKubectl(t, c.pod.json(), "apply", "-f", "-")
			stored := getObject(t, "pod", c.pod.name, "-n", c.pod.namespace).Metadata.Annotations
			preExec, bind := stored[validate.AnnotationPreExec], stored[validate.AnnotationReverseBind]
			if wrong := c.check(preExec, bind); wrong != "" {
				t.Errorf("stored with pre-exec %q and bind %q: %s", preExec, bind, wrong)
			}
		})
	}
}

// Shadow pods are not sent to shadowgate: every shadow object carries interlink.eu/shadow-for,
// the shadow Deployment's pod template too, and the pod webhooks' offloaded-pod and
// /validate-workloads' offloaded-template do not count it. Sent, each shadow pod (and each
// ReplicaSet of a shadow Deployment) would cost a call, and under failurePolicy Fail a
// shadowgate outage would keep an evicted shadow pod from being made again. There is no
// controller manager here: the pod and the ReplicaSet its controllers would make from a real
// shadow Deployment are created as server-side dry runs, and what was sent is read from serve's
// request counters (no other test runs alongside), beside the same objects given one more
// interLink annotation, which are sent, so the counters are seen to move.
func TestShadowPodsAreNotSentToShadowgate(t *testing.T) {
	createNamespaces(t, "shadowpods")
	// The shadow pod carries the offloaded pod's annotations, but not its interLink ones.
	p := offloaded{name: "trainer", namespace: "shadowpods", node: "hpc-vk", ports: []int32{8888},
		annotations: map[string]string{validate.AnnotationExtraPorts: "9000", "prometheus.io/scrape": "true"}}
	mustKubectl(t, p.json(), "apply", "-f", "-")
	var shadow appsv1.Deployment
	if err := json.Unmarshal([]byte(mustKubectl(t, "", "get", "deployment", p.shadowName(), "-n", p.shadowNamespace(), "-o", "json")), &shadow); err != nil {
		t.Fatal(err)
	}
	if shadow.Spec.Template.Annotations[inject.AnnotationShadowFor] == "" {
		t.Fatalf("the shadow Deployment's pod template lacks %s: %+v", inject.AnnotationShadowFor, shadow.Spec.Template.ObjectMeta)
	}
	// The objects made from the shadow's template, with extra annotations on the pod template.
	made := func(name string, extra map[string]string) (pod, replicaSet string) {
		t.Helper()
		template := *shadow.Spec.Template.DeepCopy()
		for k, v := range extra {
			template.Annotations[k] = v
		}
		meta := metav1.ObjectMeta{Name: name, Namespace: shadow.Namespace, Labels: template.Labels, Annotations: template.Annotations}
		podJSON, err := json.Marshal(corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta, Spec: template.Spec})
		if err != nil {
			t.Fatal(err)
		}
		rsJSON, err := json.Marshal(appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: shadow.Namespace, Labels: template.Labels, Annotations: shadow.Annotations},
			Spec:       appsv1.ReplicaSetSpec{Replicas: shadow.Spec.Replicas, Selector: shadow.Spec.Selector, Template: template}})
		if err != nil {
			t.Fatal(err)
		}
		return string(podJSON), string(rsJSON)
	}
	series := []string{
		`controller_runtime_webhook_requests_total{code="200",webhook="/mutate-pods"}`,
		`controller_runtime_webhook_requests_total{code="200",webhook="/validate-pods"}`,
		`controller_runtime_webhook_requests_total{code="200",webhook="/validate-workloads"}`,
	}
	// sent creates the pod and the ReplicaSet as server-side dry runs, and returns how much each
	// series grew meanwhile.
	sent := func(pod, replicaSet string) map[string]float64 {
		t.Helper()
		before := metricValues(t, series)
		for _, obj := range []string{pod, replicaSet} {
			if r := kubectl(t, obj, "create", "--dry-run=server", "-f", "-"); r.Err != nil {
				t.Fatalf("%v\n%s", r.Err, r.Output())
			}
		}
		after := metricValues(t, series)
		grew := map[string]float64{}
		for _, s := range series {
			grew[s] = after[s] - before[s]
		}
		return grew
	}
	if grew := sent(made("shadow-pod", nil)); grew[series[0]] != 0 || grew[series[1]] != 0 || grew[series[2]] != 0 {
		t.Errorf("a shadow pod (only %s) or its ReplicaSet was sent to shadowgate: the counters grew by %v", inject.AnnotationShadowFor, grew)
	}
	// Another interLink annotation beside shadow-for is counted, as on any pod.
	if grew := sent(made("annotated-pod", map[string]string{"interlink.eu/pod-vpn": "true"})); grew[series[0]] < 1 || grew[series[1]] < 1 || grew[series[2]] < 1 {
		t.Errorf("the shadow pod and ReplicaSet with interlink.eu/pod-vpn were not sent to each webhook: the counters grew by %v", grew)
	}
}
