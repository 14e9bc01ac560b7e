package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/inject"
)

// The scripts travel once per shadow namespace: the shadows of two pods mount one immutable
// scripts ConfigMap, named by its content, and carry no script themselves. An earlier
// shadowgate's scripts (another content, so another name, which an upgrade leaves behind,
// mounted by a shadow that shadowgate rendered) are deleted once no shadow mounts them, while
// the current ones, older than those and mounted all along, stay, and come back if deleted.
func TestShadowsOfANamespaceShareOneScriptsConfigMap(t *testing.T) {
	createNamespaces(t, "scripts")
	pods := []offloaded{
		{name: "first", namespace: "scripts", node: "hpc-vk", ports: []int32{8888}},
		{name: "second", namespace: "scripts", node: "hpc-vk", ports: []int32{8888}},
	}
	for _, p := range pods {
		mustKubectl(t, p.json(), "apply", "-f", "-")
	}
	ns := pods[0].shadowNamespace()
	current := inject.ScriptsConfigMap(ns).Name
	for _, p := range pods {
		if got := jsonpath(t, `{.spec.template.spec.volumes[?(@.name=="scripts")].configMap.name}`, "deployment", p.shadowName(), "-n", ns); got != current {
			t.Errorf("the shadow of %s mounts scripts ConfigMap %q, want %q", p.name, got, current)
		}
		deployment := mustKubectl(t, "", "get", "deployment", p.shadowName(), "-n", ns, "-o", "json")
		if strings.Contains(deployment, "#!/bin/") {
			t.Errorf("the shadow Deployment of %s carries a script", p.name)
		}
		t.Logf("shadow Deployment of %s as stored: %d bytes of JSON", p.name, compactLen(t, deployment))
	}
	scripts := mustKubectl(t, "", "get", "configmap", "-n", ns, "-l", "interlink.eu/shadow-role=scripts",
		"-o", `jsonpath={range .items[*]}{.metadata.name} {.immutable} {.metadata.managedFields[*].manager}{"\n"}{end}`)
	if want := current + " true shadowgate\n"; scripts != want {
		t.Fatalf("scripts ConfigMaps of %s:\n%s\nwant one, immutable, written by shadowgate:\n%s", ns, scripts, want)
	}
	t.Logf("scripts ConfigMap as stored: %d bytes of JSON", compactLen(t, mustKubectl(t, "", "get", "configmap", current, "-n", ns, "-o", "json")))

	previous := inject.ScriptsConfigMapPrefix + "0000000000"
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+previous+", namespace: "+ns+
		", labels: {app.kubernetes.io/managed-by: shadowgate, interlink.eu/shadow-role: scripts}}\nimmutable: true\ndata: {ssh-forward.sh: exit}\n", "create", "-f", "-")
	mustKubectl(t, "", "patch", "deployment", pods[0].shadowName(), "-n", ns, "-p",
		`{"spec":{"template":{"spec":{"volumes":[{"name":"scripts","configMap":{"name":"`+previous+`"}}]}}}}`)
	mustKubectl(t, "", "delete", "pod", pods[0].name, "-n", pods[0].namespace)
	// The shadow goes at once; the ConfigMap after two sweeps a grace period apart, once it is
	// a grace period old.
	eventually(t, 5*gracePeriod, "the earlier scripts ConfigMap is deleted", func() (bool, string) {
		ok, out := exists(t, "configmap", previous, "-n", ns)
		return !ok, out
	})
	if ok, out := exists(t, "configmap", current, "-n", ns); !ok {
		t.Fatalf("the scripts ConfigMap the second shadow mounts was deleted: %s", out)
	}

	// Deleted by hand while the second shadow mounts it, it comes back with the next sweep.
	mustKubectl(t, "", "delete", "configmap", current, "-n", ns)
	eventually(t, 2*gracePeriod, "the scripts ConfigMap a shadow mounts is applied again", func() (bool, string) {
		return exists(t, "configmap", current, "-n", ns)
	})
}

// compactLen is the length of the JSON document doc without kubectl's indentation.
func compactLen(t *testing.T, doc string) int {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	return b.Len()
}

// A ConfigMap of the scripts' name, shadowgate's labels and other content, immutable, is the
// one the API server will not let shadowgate apply over: the pod is refused with the remedy.
func TestAnImmutableScriptsConfigMapOfOtherContentRefusesThePodWithTheRemedy(t *testing.T) {
	const ns = "scripts-other"
	createNamespaces(t, ns)
	handOverShadowNamespaces(t, ns)
	shadowNS, name := inject.ShadowNamespace(ns, false), inject.ScriptsConfigMap("").Name
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: "+shadowNS+
		", labels: {app.kubernetes.io/managed-by: shadowgate, interlink.eu/shadow-role: scripts}}\nimmutable: true\ndata: {ssh-forward.sh: exit}\n", "create", "-f", "-")
	p := offloaded{name: "nb", namespace: ns, node: "hpc-vk", ports: []int32{8888}}
	r := kubectl(t, p.json(), "apply", "-f", "-")
	if r.Err == nil {
		t.Fatalf("the pod was admitted over a foreign scripts ConfigMap:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, "kubectl delete configmap -n "+shadowNS+" "+name)
}
