package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/drift"
)

// currentShadows is how many shadows the reconciler is shown to leave alone.
const currentShadows = 100

// serveMaxRolling is serve's --max-rolling-shadows as the suite runs it: the default.
const serveMaxRolling = 5

// 100 current shadows: a policy change that renders them as before writes nothing. One that
// renders them differently rolls them serveMaxRolling at a time, shadows waiting their turn
// marked OutOfDate on their pods; here no node runs the new shadow pods, so no roll completes
// and no more than serveMaxRolling are ever applied: a policy whose shadows do not come up
// stops there.
func TestShadowsFollowThePolicyAFewAtATime(t *testing.T) {
	const ns = "drift"
	createNamespaces(t, ns)
	restoreExamplePolicy(t)
	// Their rolls, which no node completes, give up their slots with the pods.
	t.Cleanup(func() { kubectl(t, "", "delete", "pods", "--all", "-n", ns, "--wait=false") })
	var pods []string
	for i := range currentShadows {
		pods = append(pods, offloaded{name: fmt.Sprintf("nb-%03d", i), namespace: ns, node: "hpc-vk", ports: []int32{8888}}.json())
	}
	mustKubectl(t, `{"apiVersion":"v1","kind":"List","items":[`+strings.Join(pods, ",")+`]}`, "apply", "-f", "-")
	shadowNS := inject.ShadowNamespace(ns, false)
	hashes := func() map[string]string { return renderedHashes(t, shadowNS) }
	// unchanged counts the Deployments whose hash is the one before.
	var before map[string]string
	unchanged := func(now map[string]string) int {
		n := 0
		for name, hash := range now {
			if before[name] == hash {
				n++
			}
		}
		return n
	}
	eventually(t, time.Minute, fmt.Sprintf("%d shadow Deployments, each with its hash", currentShadows), func() (bool, string) {
		before = hashes()
		return len(before) == currentShadows, fmt.Sprintf("%d", len(before))
	})

	example, err := os.ReadFile(exampleFile("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reconciles := func() float64 {
		return metricSum(t, "controller_runtime_reconcile_total", `controller="shadows"`)
	}
	writes := func() float64 {
		var n float64
		for _, method := range []string{"PATCH", "POST", "DELETE"} {
			n += metricSum(t, "rest_client_requests_total", `method="`+method+`"`)
		}
		return n
	}

	// The pods' admission and first reconciles are over once shadowgate has written nothing
	// for a few seconds.
	last, quietSince := writes(), time.Now()
	eventually(t, time.Minute, "shadowgate to stop writing after the pods were created", func() (bool, string) {
		if n := writes(); n != last {
			last, quietSince = n, time.Now()
		}
		return time.Since(quietSince) > 3*time.Second, fmt.Sprintf("%v writes so far", last)
	})

	// A node added: hpc-vk's shadows render as before.
	startReconciles, startWrites := reconciles(), writes()
	mustKubectl(t, strings.Replace(string(example), "    virtualNodes:\n", "    virtualNodes:\n      extra-vk:\n        Network:\n          ShadowMode: wstunnel\n", 1), "apply", "-f", "-")
	eventually(t, time.Minute, fmt.Sprintf("the shadows reconciled %d times under the new policy", currentShadows), func() (bool, string) {
		n := reconciles() - startReconciles
		return n >= currentShadows, fmt.Sprintf("%v reconciles", n)
	})
	time.Sleep(2 * time.Second) // what the last reconciles would write
	if n := writes() - startWrites; n != 0 {
		t.Errorf("shadowgate made %v writes (PATCH, POST, DELETE) for %d shadows the new policy renders as before; want none", n, currentShadows)
	}
	if n := unchanged(hashes()); n != currentShadows {
		t.Errorf("%d of %d shadows kept their hash under a policy that renders them as before", n, currentShadows)
	}

	// ExtraOptions changed: every shadow renders differently, serveMaxRolling roll.
	mustKubectl(t, strings.Replace(string(example), "            KeySecret: hpc-ssh-key\n", "            KeySecret: hpc-ssh-key\n            ExtraOptions: [ServerAliveInterval=15]\n", 1), "apply", "-f", "-")
	// states counts the shadows' states in namespace (all of them when empty). The slots are
	// the cluster's: shadows of hpc-vk that other tests left running are out of date too, and
	// one of them may hold a slot, so the slots are counted in every namespace.
	states := func(namespace string) map[drift.State]int {
		where := []string{"-A"}
		if namespace != "" {
			where = []string{"-n", namespace}
		}
		out := mustKubectl(t, "", append(append([]string{"get", "tunnels"}, where...), "-o", `jsonpath={range .items[*]}{.status.shadow.state}{"\n"}{end}`)...)
		counts := map[drift.State]int{}
		for line := range strings.Lines(out) {
			st := drift.State(strings.TrimSpace(line))
			if st == "" {
				st = drift.Current
			}
			counts[st]++
		}
		return counts
	}
	eventually(t, time.Minute, fmt.Sprintf("%d shadows rolling and the others waiting", serveMaxRolling), func() (bool, string) {
		all, here := states(""), states(ns)
		return all[drift.Rolling] == serveMaxRolling && here[drift.Rolling]+here[drift.OutOfDate] == currentShadows,
			fmt.Sprintf("pods: %v here, %v in all; %d shadows applied anew", here, all, currentShadows-unchanged(hashes()))
	})
	time.Sleep(5 * time.Second) // no roll completes: none more starts
	rolling := states(ns)[drift.Rolling]
	if all := states("")[drift.Rolling]; all != serveMaxRolling {
		t.Errorf("%d shadows rolling in the cluster, want %d", all, serveMaxRolling)
	}
	if n := currentShadows - unchanged(hashes()); n != rolling {
		t.Errorf("%d shadows applied under the new policy, want the %d rolling", n, rolling)
	}
	m := metricValues(t, []string{`shadowgate_shadows_drifted{state="Rolling"}`, `shadowgate_shadows_drifted{state="OutOfDate"}`})
	// The gauge is the whole cluster's, as the slots are.
	if m[`shadowgate_shadows_drifted{state="Rolling"}`] != serveMaxRolling || m[`shadowgate_shadows_drifted{state="OutOfDate"}`] < float64(currentShadows-rolling) {
		t.Errorf("gauge %v, want %d Rolling and at least %d OutOfDate", m, serveMaxRolling, currentShadows-rolling)
	}
	events := mustKubectl(t, "", "get", "events", "-n", ns, "--field-selector", "reason=ShadowRolled", "-o", "name")
	if n := len(strings.Fields(events)); n != rolling {
		t.Errorf("%d ShadowRolled Events, want one for each of the %d rolling", n, rolling)
	}
}

// metricSum adds the values of every series of metric name whose labels contain all of labels.
func metricSum(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	text, err := cluster.sg.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for line := range strings.Lines(text) {
		series, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !strings.HasPrefix(series, name+"{") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(series, l)
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}

// A pod's owner cannot say its shadows roll: its edit rights read its pods' Tunnels and write
// none, nor the shadow Deployments a roll is read on. With more of its own pods than there are
// slots, whose shadows a policy change leaves current, it holds no slot; another namespace's
// shadows, which the same change renders differently, take slots and are all applied
// (victimShadows, fewer than the slots, so other tests' rolls leave room).
func TestAPodOwnersForgedRollsHoldNoSlots(t *testing.T) {
	const victimShadows = 2
	const forger, victim, tenant = "drift-forger", "drift-victim", "roll-forger"
	createNamespaces(t, forger, victim)
	t.Cleanup(func() {
		for _, ns := range []string{forger, victim} {
			kubectl(t, "", "delete", "pods", "--all", "-n", ns, "--wait=false")
		}
	})
	restoreExamplePolicy(t)
	grantEdit(t, tenant, forger)
	var forged, victims []string
	for i := range serveMaxRolling + 2 {
		forged = append(forged, offloaded{name: fmt.Sprintf("forged-%d", i), namespace: forger, node: "hpc-vk", ports: []int32{8888}}.json())
	}
	for i := range victimShadows {
		victims = append(victims, offloaded{name: fmt.Sprintf("victim-%d", i), namespace: victim, node: "cern-vk", ports: []int32{8888}}.json())
	}
	mustKubectl(t, `{"apiVersion":"v1","kind":"List","items":[`+strings.Join(forged, ",")+`]}`, "--as="+tenant, "apply", "-f", "-")
	mustKubectl(t, `{"apiVersion":"v1","kind":"List","items":[`+strings.Join(victims, ",")+`]}`, "apply", "-f", "-")
	rendered := func(ns string) map[string]string { return renderedHashes(t, inject.ShadowNamespace(ns, false)) }
	var before map[string]string
	eventually(t, time.Minute, "every shadow Deployment, each with its hash", func() (bool, string) {
		before = rendered(victim)
		n := len(rendered(forger))
		return len(before) == victimShadows && n == serveMaxRolling+2, fmt.Sprintf("%d of the victim's, %d of the forger's", len(before), n)
	})

	mustKubectl(t, "", "--as="+tenant, "get", "tunnels", "-n", forger)
	for _, args := range [][]string{
		{"patch", "tunnel", "forged-0", "-n", forger, "--subresource=status", "--type=merge", "-p", `{"status":{"shadow":{"state":"Rolling"}}}`},
		{"delete", "tunnel", "forged-0", "-n", forger},
	} {
		if r := kubectl(t, "", append([]string{"--as=" + tenant}, args...)...); r.Err == nil || !strings.Contains(r.Stderr, "forbidden") {
			t.Errorf("kubectl %s as the pods' owner was not forbidden:\n%s", strings.Join(args, " "), r.Output())
		}
	}
	forgedTunnel := `{"apiVersion":"shadowgate.interlink.eu/v1alpha1","kind":"Tunnel","metadata":{"name":"forged-extra","namespace":"` + forger + `"}}`
	if r := kubectl(t, forgedTunnel, "--as="+tenant, "create", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, "forbidden") {
		t.Errorf("the pods' owner created a Tunnel:\n%s", r.Output())
	}
	example, err := os.ReadFile(exampleFile("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(example), "            KeytabSecret: cern-keytab\n", "            KeytabSecret: cern-keytab\n            ExtraOptions: [ServerAliveInterval=15]\n", 1)
	if changed == string(example) {
		t.Fatal("the example policy has no cern-vk KeytabSecret line to change beside")
	}
	mustKubectl(t, changed, "apply", "-f", "-")
	eventually(t, time.Minute, fmt.Sprintf("the victim's %d shadows applied under the new policy", victimShadows), func() (bool, string) {
		rolled := 0
		for name, hash := range rendered(victim) {
			if before[name] != hash {
				rolled++
			}
		}
		return rolled == victimShadows, fmt.Sprintf("%d rolled", rolled)
	})
}

// renderedHashes is each shadow Deployment's interlink.eu/shadow-rendered in shadowNS, by name:
// a hash of the pod's own render, so one per pod.
func renderedHashes(t *testing.T, shadowNS string) map[string]string {
	t.Helper()
	out := mustKubectl(t, "", "get", "deployments", "-n", shadowNS, "-o", `jsonpath={range .items[*]}{.metadata.name} {.metadata.annotations.interlink\.eu/shadow-rendered}{"\n"}{end}`)
	byName := map[string]string{}
	for line := range strings.Lines(out) {
		if name, hash, ok := strings.Cut(strings.TrimSpace(line), " "); ok && hash != "" {
			byName[name] = hash
		}
	}
	return byName
}
