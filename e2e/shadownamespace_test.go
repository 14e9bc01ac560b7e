package e2e

import (
	"testing"

	"github.com/interlink-hq/shadowgate/inject"
)

// A tenant who may create namespaces (as under HNC, Capsule or Kubeflow profiles) creates the
// victim's shadow namespace before the victim's first offloaded pod, and its own: it cannot
// mark either as the victim's (the API server's admission policy refuses the label), the
// victim's pod is refused naming the namespace and the handover, and neither namespace
// receives a shadow or a copy of the site's key.
func TestATenantCannotTakeAShadowNamespace(t *testing.T) {
	const victim, own, tenant = "squat-victim", "squat-own", "squatter-admin"
	createNamespaces(t, victim, own)
	mustKubectl(t, "", "create", "clusterrole", "namespace-creator", "--verb=get,list,create,update,patch", "--resource=namespaces")
	mustKubectl(t, "", "create", "clusterrolebinding", "namespace-creator", "--clusterrole=namespace-creator", "--user="+tenant)
	t.Cleanup(func() {
		kubectl(t, "", "delete", "--ignore-not-found", "clusterrolebinding/namespace-creator", "clusterrole/namespace-creator")
	})
	as := "--as=" + tenant

	for _, podNS := range []string{victim, own} {
		shadowNS := inject.ShadowNamespace(podNS, false)
		mustKubectl(t, "", as, "create", "namespace", shadowNS)
		r := kubectl(t, "", as, "label", "namespace", shadowNS, inject.LabelShadowNamespaceFor+"="+podNS)
		if r.Err == nil {
			t.Errorf("the tenant marked %s as the shadow namespace of %s:\n%s", shadowNS, podNS, r.Output())
		}
		expectContains(t, r.Stderr, "ValidatingAdmissionPolicy 'shadowgate-shadow-namespace-marker'",
			"only shadowgate and the cluster admins may set, change or remove the label "+inject.LabelShadowNamespaceFor)

		p := offloaded{name: "notebook", namespace: podNS, node: "hpc-vk", ports: []int32{8888}}
		r = kubectl(t, p.json(), "apply", "-f", "-")
		if r.Err == nil {
			t.Fatalf("a pod of %s was admitted with its shadows in the tenant's %s:\n%s", podNS, shadowNS, r.Output())
		}
		expectContains(t, r.Stderr, "namespace "+shadowNS+", where the shadows of namespace "+podNS+" go, already exists",
			"kubectl label namespace "+shadowNS+" "+inject.LabelShadowNamespaceFor+"="+podNS+" --overwrite")
		for _, args := range [][]string{
			{"secret", "hpc-ssh-key", "-n", shadowNS},
			{"configmap", "hpc-known-hosts", "-n", shadowNS},
			{"deployment", p.shadowName(), "-n", shadowNS},
			{"pod", p.name, "-n", podNS},
		} {
			if ok, out := exists(t, args...); ok {
				t.Errorf("the refused pod left %s", out)
			}
		}
	}
}
