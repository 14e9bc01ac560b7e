package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Issue 18, reproduction 1: every pod of a virtual node runs its job as the node's one site
// account, so a tenant who may create pods in its own namespace must not be able to place one
// on a virtual node bound to another tenant. The tenant is a ServiceAccount with RBAC to create
// pods in its namespace only, impersonated through kubectl --as; before namespaces could be
// bound its pod was admitted on the victim's node.
func TestVirtualNodeBoundToNamespacesRefusesOtherTenants(t *testing.T) {
	const tenant, victim, lab = "nsbind-tenant", "nsbind-victim", "nsbind-lab"
	createNamespaces(t, tenant, victim, lab)
	mustKubectl(t, "", "label", "namespace", lab, "hpc.example.org/tenant=lab")
	as := map[string]string{}
	for _, ns := range []string{tenant, victim, lab} {
		mustKubectl(t, "", "create", "serviceaccount", "author", "-n", ns)
		mustKubectl(t, "", "create", "role", "pod-author", "--verb=create,get", "--resource=pods", "-n", ns)
		mustKubectl(t, "", "create", "rolebinding", "pod-author", "--role=pod-author", "--serviceaccount="+ns+":author", "-n", ns)
		as[ns] = "--as=system:serviceaccount:" + ns + ":author"
	}

	restoreExamplePolicy(t)
	example, err := os.ReadFile(exampleFile("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The example policy plus two wstunnel nodes (no shadow to apply): one bound by a list,
	// one by a label selector.
	bound := strings.Replace(string(example), "    virtualNodes:\n", "    virtualNodes:\n"+
		"      victim-vk:\n        AllowedNamespaces: ["+victim+"]\n        Network:\n          ShadowMode: wstunnel\n"+
		"      lab-vk:\n        AllowedNamespaceSelector:\n          matchLabels:\n            hpc.example.org/tenant: lab\n        Network:\n          ShadowMode: wstunnel\n", 1)
	r := kubectl(t, bound, "apply", "-f", "-")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Output())
	}
	// The policy's own admission says which nodes are still open to any namespace.
	expectContains(t, r.Stderr, "Warning: data[policy.yaml].virtualNodes[hpc-vk]: any namespace may use virtual node hpc-vk")
	if strings.Contains(r.Stderr, "virtualNodes[victim-vk]: any namespace") || strings.Contains(r.Stderr, "virtualNodes[lab-vk]: any namespace") {
		t.Errorf("a bound node was warned of as open to any namespace:\n%s", r.Stderr)
	}

	attack := offloaded{name: "squatter", namespace: tenant, node: "victim-vk"}
	eventually(t, 30*time.Second, "the tenant's pod on the victim's node is refused", func() (bool, string) {
		r := kubectl(t, attack.json(), as[tenant], "create", "-f", "-")
		return r.Err != nil && strings.Contains(r.Stderr, "spec.nodeSelector[kubernetes.io/hostname]: Forbidden: namespace "+tenant+" may not use virtual node victim-vk"), r.Output()
	})
	r = kubectl(t, attack.json(), as[tenant], "create", "-f", "-")
	expectContains(t, r.Stderr, `The Pod "squatter" is invalid: spec.nodeSelector[kubernetes.io/hostname]: Forbidden: namespace `+tenant+` may not use virtual node victim-vk`,
		"the namespaces listed in AllowedNamespaces ["+victim+"]",
		"ask the cluster admin to add "+tenant+" to virtualNodes[victim-vk].AllowedNamespaces")
	if ok, _ := exists(t, "pod", "squatter", "-n", tenant); ok {
		t.Error("the refused pod was stored")
	}

	r = kubectl(t, offloaded{name: "squatter", namespace: tenant, node: "lab-vk"}.json(), as[tenant], "create", "-f", "-")
	if r.Err == nil {
		t.Fatalf("the tenant's pod on the lab's node was admitted:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, "namespace "+tenant+" may not use virtual node lab-vk",
		`AllowedNamespaceSelector "hpc.example.org/tenant=lab"`, "to label namespace "+tenant+" to match it")

	// The namespaces the nodes are bound to are admitted, by the list and by their label.
	for ns, node := range map[string]string{victim: "victim-vk", lab: "lab-vk"} {
		if r := kubectl(t, offloaded{name: "owner", namespace: ns, node: node}.json(), as[ns], "create", "-f", "-"); r.Err != nil {
			t.Errorf("the pod of %s on %s was refused: %v\n%s", ns, node, r.Err, r.Output())
		}
	}
}
