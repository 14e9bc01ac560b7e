package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/internal/applier"
)

// A tenant whose offloaded pods its namespace's ResourceQuota refuses (the plugin runs after the
// validating webhooks, so shadowgate has applied each pod's shadow by then) fills only its
// namespace's share of the unconfirmed-shadows bound: past it its pods are refused with a 429
// naming its namespace and the flag, while another tenant's pod is admitted, stored and its
// shadow started. The refused pods' shadows never run: their Deployments have no replicas.
// Both tenants are namespace-only accounts (edit in their namespace) acting with kubectl --as;
// serve has a limit of 3 and a share of 2, so the share, not the limit, refuses first.
func TestATenantRefusedAfterAdmissionFillsOnlyItsShare(t *testing.T) {
	const greedy, bystander = "quota-greedy", "quota-bystander"
	createNamespaces(t, greedy, bystander)
	t.Cleanup(func() { kubectl(t, "", "delete", "namespace", greedy, bystander, "--wait=false", "--ignore-not-found") })
	grantEdit(t, "greedy-tenant", greedy)
	grantEdit(t, "bystander-tenant", bystander)
	// No controller manager computes the quota's usage here: the admin's patch of its status
	// stands in for it, and the ResourceQuota plugin refuses by it.
	mustKubectl(t, `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"no-pods","namespace":"`+greedy+`"},"spec":{"hard":{"pods":"0"}}}`, "apply", "-f", "-")
	mustKubectl(t, "", "patch", "resourcequota", "no-pods", "-n", greedy, "--subresource=status", "--type=merge",
		"-p", `{"status":{"hard":{"pods":"0"},"used":{"pods":"0"}}}`)
	serveInSuitesPlace(t, "serve with a share of 2", "--max-unconfirmed-shadows=3", "--max-unconfirmed-shadows-per-namespace=2")
	t.Cleanup(func() { kubectl(t, "", "delete", "pods", "--all", "-n", bystander, "--wait=false") })

	var refusedByQuota []offloaded
	var tooMany string
	for i := range 4 {
		p := offloaded{name: fmt.Sprintf("flood-%d", i), namespace: greedy, node: "hpc-vk", ports: []int32{8888}}
		r := kubectl(t, p.json(), "--as=greedy-tenant", "create", "-f", "-")
		if r.Err == nil {
			t.Fatalf("the quota admitted pod %s: %s", p.name, r.Output())
		}
		if !strings.Contains(r.Stderr, "exceeded quota: no-pods") {
			tooMany = r.Stderr
			break
		}
		refusedByQuota = append(refusedByQuota, p)
	}
	if len(refusedByQuota) != 2 {
		t.Errorf("%d pods reached the quota before shadowgate refused, want the share, 2", len(refusedByQuota))
	}
	for _, want := range []string{"TooManyRequests", `namespace "` + greedy + `" holds 2 shadows`, "--max-unconfirmed-shadows-per-namespace", "resourcequota -n"} {
		if !strings.Contains(tooMany, want) {
			t.Errorf("shadowgate's refusal does not say %q:\n%s", want, tooMany)
		}
	}
	for _, p := range refusedByQuota {
		held := jsonpath(t, "{.spec.replicas} {.metadata.labels}", "deployment", p.shadowName(), "-n", p.shadowNamespace())
		if !strings.HasPrefix(held, "0 ") || !strings.Contains(held, applier.LabelAwaitingPod) {
			t.Errorf("the shadow of %s, refused by the quota, has replicas and labels %q: want no replicas, %s", p.name, held, applier.LabelAwaitingPod)
		}
	}

	honest := offloaded{name: "notebook", namespace: bystander, node: "hpc-vk", ports: []int32{8888}}
	if r := kubectl(t, honest.json(), "--as=bystander-tenant", "create", "-f", "-"); r.Err != nil {
		t.Fatalf("another tenant's pod was refused while %s held its share:\n%s", greedy, r.Output())
	}
	eventually(t, gracePeriod/2, "the stored pod's shadow is started", func() (bool, string) {
		got := jsonpath(t, "{.spec.replicas} {.metadata.labels}", "deployment", honest.shadowName(), "-n", honest.shadowNamespace())
		return strings.HasPrefix(got, "1 ") && !strings.Contains(got, applier.LabelAwaitingPod), got
	})
	// The reconciler, which started it, left the refused pods' shadows held.
	for _, p := range refusedByQuota {
		if got := jsonpath(t, "{.spec.replicas}", "deployment", p.shadowName(), "-n", p.shadowNamespace()); got != "0" && got != "" {
			t.Errorf("the shadow of %s, whose pod was never stored, has %s replicas", p.name, got)
		}
	}
}
