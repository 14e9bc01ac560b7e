package e2e

import (
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/inject"
)

// A namespace-only tenant cannot make objects of its own shadowgate's: a Deployment, Service,
// ConfigMap or NetworkPolicy labelled app.kubernetes.io/managed-by: shadowgate, created or
// labelled so later, is refused by the API server's policy, which names itself. Such objects
// would be taken for another tenant's shadow (its pod's UID and shadow-for copied onto them),
// and the cache that holds shadowgate's objects would hold their bytes: a megabyte of planted
// node ConfigMap is refused like the rest, and nothing of them is stored. The victim's shadow is
// untouched. Of a marked object in its namespace (a shadow beside its pod), the tenant may
// change what it may change of any object, and remove the mark, but not point it at another
// pod.
func TestATenantCannotMarkObjectsAsShadowgates(t *testing.T) {
	const own, victimNS, tenant = "marks-own", "marks-victim", "marker"
	createNamespaces(t, own, victimNS)
	victim := offloaded{name: "notebook", namespace: victimNS, node: "hpc-vk", ports: []int32{8888}}
	t.Cleanup(func() {
		kubectl(t, "", "delete", "namespace", own, victimNS, victim.shadowNamespace(), "--wait=false", "--ignore-not-found")
	})
	grantEdit(t, tenant, own)
	as := "--as=" + tenant
	mustKubectl(t, victim.json(), "apply", "-f", "-")
	uid := mustKubectl(t, "", "get", "pod", victim.name, "-n", victimNS, "-o", "jsonpath={.metadata.uid}")
	shadowNS := victim.shadowNamespace()
	generation := func() string {
		return mustKubectl(t, "", "get", "deployment", victim.shadowName(), "-n", shadowNS, "-o", "jsonpath={.metadata.generation}")
	}
	before := generation()

	claim := ", labels: {app.kubernetes.io/managed-by: shadowgate, interlink.eu/pod-uid: " + uid +
		"}, annotations: {interlink.eu/shadow-for: " + victimNS + "/" + victim.name + "}}\n"
	big := strings.Repeat("x", 1<<20-1024)
	for kind, manifest := range map[string]string{
		"Deployment": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + victim.shadowName() + ", namespace: " + own + claim +
			"spec:\n  replicas: 0\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x, variant: planted}}\n" +
			"    spec: {containers: [{name: c, image: busybox}]}\n",
		"Service": "apiVersion: v1\nkind: Service\nmetadata: {name: " + victim.shadowName() + ", namespace: " + own + claim +
			"spec: {ports: [{port: 1}]}\n",
		"ConfigMap": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + inject.NodeConfigMapName(victim.shadowName()) + ", namespace: " + own + claim +
			"data: {compute-node: \"planted\\u001b[2J\", filler: " + big + "}\n",
		"NetworkPolicy": "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: " + victim.shadowName() + ", namespace: " + own + claim +
			"spec: {podSelector: {}}\n",
	} {
		r := kubectl(t, manifest, as, "create", "-f", "-")
		if r.Err == nil {
			t.Errorf("the tenant created a %s marked as shadowgate's:\n%s", kind, r.Output())
			continue
		}
		expectContains(t, r.Stderr, "ValidatingAdmissionPolicy 'shadowgate-shadow-object-marks'",
			"only shadowgate and the cluster admins may label a "+kind+" app.kubernetes.io/managed-by: shadowgate")
	}
	for _, kind := range []string{"deployment", "service", "configmap", "networkpolicy"} {
		if out := mustKubectl(t, "", "get", kind, "-n", own, "-l", "app.kubernetes.io/managed-by=shadowgate", "-o", "name"); out != "" {
			t.Errorf("marked objects were stored in the tenant's namespace: %s", out)
		}
	}

	// Unmarked, the object is the tenant's own; marking it later is refused the same way.
	mustKubectl(t, "", as, "create", "configmap", "plain", "-n", own, "--from-literal=a=b")
	r := kubectl(t, "", as, "label", "configmap", "plain", "-n", own, "app.kubernetes.io/managed-by=shadowgate")
	if r.Err == nil {
		t.Errorf("the tenant marked its ConfigMap as shadowgate's:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, "ValidatingAdmissionPolicy 'shadowgate-shadow-object-marks'")

	// A marked object in the tenant's namespace, as shadowgate writes one beside its pod.
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: beside, namespace: "+own+
		", labels: {app.kubernetes.io/managed-by: shadowgate, interlink.eu/pod-uid: 00000000-0000-0000-0000-000000000031}"+
		", annotations: {interlink.eu/shadow-for: "+own+"/notebook}}\ndata: {compute-node: ''}\n", "create", "-f", "-")
	mustKubectl(t, "", as, "annotate", "configmap", "beside", "-n", own, "note=the tenant's")
	for _, change := range [][]string{
		{"label", "configmap", "beside", "-n", own, "--overwrite", inject.LabelPodUID + "=" + uid},
		{"annotate", "configmap", "beside", "-n", own, "--overwrite", inject.AnnotationShadowFor + "=" + victimNS + "/" + victim.name},
	} {
		r := kubectl(t, "", append([]string{as}, change...)...)
		if r.Err == nil {
			t.Errorf("the tenant repointed shadowgate's ConfigMap at another pod (%s):\n%s", strings.Join(change, " "), r.Output())
		}
		expectContains(t, r.Stderr, "only shadowgate and the cluster admins may change the label "+inject.LabelPodUID)
	}
	mustKubectl(t, "", as, "label", "configmap", "beside", "-n", own, "app.kubernetes.io/managed-by-")

	if after := generation(); after != before {
		t.Errorf("the victim's shadow Deployment went from generation %s to %s", before, after)
	}
}
