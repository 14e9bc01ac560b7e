package e2e

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
)

// tenantsOwn is what a tenant's planted Secret holds.
const tenantsOwn = "the tenant's own"

// plantedSecret is a Secret a tenant creates in its namespace under the name of the policy's
// KeySecret, annotated as shadowgate annotates its copies when marked.
func plantedSecret(ns string, marked bool) string {
	annotations := ""
	if marked {
		annotations = ", annotations: {interlink.eu/replicated-from: shadowgate-system/" + keySource + "}"
	}
	return "apiVersion: v1\nkind: Secret\nmetadata: {name: " + keySource + ", namespace: " + ns + annotations + "}\n" +
		"stringData: {" + keyKey + ": \"" + tenantsOwn + "\"}\n"
}

// plantedDeployment is a Deployment a tenant creates in its namespace, with no replicas,
// labelled as shadowgate labels its shadows (and with podUID, as the shadow of that pod) and
// mounting the Secret named as the policy's KeySecret.
func plantedDeployment(ns, name, podUID string) string {
	labels := "app.kubernetes.io/managed-by: shadowgate"
	if podUID != "" {
		labels += ", interlink.eu/pod-uid: " + podUID
	}
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: " + ns + ", labels: {" + labels + "}}\n" +
		"spec:\n  replicas: 0\n  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata: {labels: {app: " + name + "}}\n    spec:\n" +
		"      containers: [{name: c, image: busybox}]\n      volumes: [{name: key, secret: {secretName: " + keySource + "}}]\n"
}

// plant has the tenant create marked objects (manifest), which the API server's
// shadowgate-shadow-object-marks policy refuses it, then creates them as the cluster admin: as
// objects marked before that policy was installed would be, for the tests of what shadowgate
// itself makes of them.
func plant(t *testing.T, tenant, manifest string) {
	t.Helper()
	r := kubectl(t, manifest, "--as="+tenant, "create", "-f", "-")
	if r.Err == nil {
		t.Fatalf("the tenant created objects marked as shadowgate's:\n%s", r.Output())
	}
	expectContains(t, r.Stderr, "ValidatingAdmissionPolicy 'shadowgate-shadow-object-marks'")
	mustKubectl(t, manifest, "create", "-f", "-")
}

// followProbe is a Deployment the cluster admin makes in a namespace where copies are
// shadowgate's, labelled as a shadow and mounting the key and known-hosts copies: the follower
// checks both copies as it sees it, and only the follower, as no pod is admitted for it.
func followProbe(ns string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: follow-probe, namespace: " + ns + ", labels: {app.kubernetes.io/managed-by: shadowgate}}\n" +
		"spec:\n  replicas: 0\n  selector: {matchLabels: {app: follow-probe}}\n  template:\n    metadata: {labels: {app: follow-probe}}\n    spec:\n" +
		"      containers: [{name: c, image: " + shadowImage + "}]\n" +
		"      volumes: [{name: key, secret: {secretName: " + keySource + "}}, {name: hosts, configMap: {name: " + knownHostsSource + "}}]\n"
}

// staleKey makes the key copy in ns hold other content than its source, marker kept, as a copy
// written before a rotation does.
func staleKey(t *testing.T, ns string) {
	t.Helper()
	mustKubectl(t, "", "patch", "secret", keySource, "-n", ns, "--type=merge", "-p",
		`{"data":{"`+keyKey+`":"`+base64.StdEncoding.EncodeToString([]byte("a key before the rotation"))+`"}}`)
}

// grantEdit gives user the ClusterRole edit in each namespace, by a RoleBinding there, as a
// cluster admin gives a tenant its namespace. This control plane runs no controller manager, so
// edit first gets the rules a cluster's aggregates into it: those of every ClusterRole its
// aggregationRule selects, view's (itself aggregated) among them.
func grantEdit(t *testing.T, user string, namespaces ...string) {
	t.Helper()
	var roles rbacv1.ClusterRoleList
	if err := json.Unmarshal([]byte(mustKubectl(t, "", "get", "clusterroles", "-o", "json")), &roles); err != nil {
		t.Fatal(err)
	}
	var aggregate func(name string) []rbacv1.PolicyRule
	aggregate = func(name string) []rbacv1.PolicyRule {
		for _, r := range roles.Items {
			if r.Name != name {
				continue
			}
			if r.AggregationRule == nil {
				return r.Rules
			}
			var rules []rbacv1.PolicyRule
			for _, s := range r.AggregationRule.ClusterRoleSelectors {
				selector, err := metav1.LabelSelectorAsSelector(&s)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range roles.Items {
					if o.Name != name && selector.Matches(labels.Set(o.Labels)) {
						rules = append(rules, aggregate(o.Name)...)
					}
				}
			}
			return rules
		}
		t.Fatalf("no ClusterRole %s", name)
		return nil
	}
	patch, err := json.Marshal(map[string]any{"rules": aggregate("edit")})
	if err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "", "patch", "clusterrole", "edit", "--type=merge", "-p", string(patch))
	for _, ns := range namespaces {
		mustKubectl(t, "", "create", "rolebinding", "edit", "-n", ns, "--clusterrole=edit", "--user="+user)
		for _, verb := range []string{"create deployments", "create secrets", "update secrets", "create pods"} {
			if r := kubectl(t, "", append(strings.Fields("auth can-i "+verb+" -n "+ns), "--as="+user)...); strings.TrimSpace(r.Stdout) != "yes" {
				t.Fatalf("edit does not let %s %s in %s: %s", user, verb, ns, r.Output())
			}
		}
	}
	if r := kubectl(t, "", "auth", "can-i", "patch", "namespaces", "--as="+user); strings.TrimSpace(r.Stdout) != "no" {
		t.Fatalf("%s may label namespaces: %s", user, r.Output())
	}
}

// copyNotFollowing waits for the Warning Event on the known-hosts source that names its copy in
// ns, which the follower says once it has looked at that copy.
func copyNotFollowing(t *testing.T, ns string) {
	t.Helper()
	note := "the copy ConfigMap " + ns + "/" + knownHostsSource + " does not follow this configmap"
	eventually(t, followBound, "a CopyNotFollowing Event naming "+ns+"/"+knownHostsSource, func() (bool, string) {
		out := mustKubectl(t, "", "get", "events.events.k8s.io", "-n", "shadowgate-system", "--field-selector", "reason=CopyNotFollowing",
			"-o", `jsonpath={range .items[*]}{.note}{"\n"}{end}`)
		return strings.Contains(out, note), "no Event saying " + note + "; the Events:\n" + out
	})
}

// followerLeft fails the test if serve's log at path has a line of the credential follower
// about a copy in one of namespaces: it read or wrote none there, nor tried to. The follower's
// line about the copy it updated in honest must be there, so a log whose lines this does not
// match fails rather than passes.
func followerLeft(t *testing.T, path, honest string, namespaces ...string) {
	t.Helper()
	about := func(line, ns string) bool {
		return strings.Contains(line, `"controller": "credential-copies"`) && (strings.Contains(line, " "+ns+"/") || strings.Contains(line, " into "+ns+":"))
	}
	log := readLog(t, path)
	seen := false
	for line := range strings.Lines(log) {
		seen = seen || about(line, honest)
	}
	if !seen {
		t.Errorf("serve's log %s has no line of the credential follower about the copy it updated in %s: the check of the tenant's namespaces would prove nothing", path, honest)
	}
	for _, ns := range namespaces {
		for line := range strings.Lines(log) {
			if about(line, ns) {
				t.Errorf("the follower looked at a copy in the tenant's namespace %s; serve logged, first:\n%s", ns, line)
				break
			}
		}
	}
}

// A tenant with edit in its own namespaces, and no virtual node, offloaded pod or shadow there,
// plants what the credential follower once took for a shadow needing the site's key (the
// Deployment refused it by the API server's policy, and planted by the admin: plant): a
// Deployment with no replicas, labelled app.kubernetes.io/managed-by: shadowgate and mounting a
// Secret named as the policy's KeySecret (the tenant's own TunnelFailed Events print the name),
// and a Secret of that name, annotated as a copy of the source in one namespace and not in the
// other, which the follower once said could not follow and made afresh once the tenant deleted
// it. Neither namespace gets the site's key: not by the time the follower, asked later, has
// updated a stale copy in an honest pod's shadow namespace, nor once it has made again, after
// its recheck, a refused copy there deleted after the tenant's.
func TestATenantsPlantedShadowGetsNoCopyOfTheSiteKey(t *testing.T) {
	const marked, unmarked, honestNS, tenant = "plant-marked", "plant-unmarked", "plant-honest", "planter"
	createNamespaces(t, marked, unmarked, honestNS)
	honest := offloaded{name: "trainer", namespace: honestNS, node: "hpc-vk", ports: []int32{8888}}
	t.Cleanup(func() {
		kubectl(t, "", "delete", "namespace", marked, unmarked, honestNS, honest.shadowNamespace(), "--wait=false", "--ignore-not-found")
	})
	grantEdit(t, tenant, marked, unmarked)
	as := "--as=" + tenant
	for _, ns := range []string{marked, unmarked} {
		mustKubectl(t, plantedSecret(ns, ns == marked), as, "create", "-f", "-")
		plant(t, tenant, plantedDeployment(ns, "tunnel", ""))
	}

	siteKey := copyValue(t, "secret", "shadowgate-system", keySource, keyKey)
	siteHosts := copyValue(t, "configmap", "shadowgate-system", knownHostsSource, knownHostsKey)
	mustKubectl(t, honest.json(), "apply", "-f", "-")
	hs := honest.shadowNamespace()
	if got := copyValue(t, "secret", hs, keySource, keyKey); got != siteKey {
		t.Fatalf("the honest pod's shadow namespace holds %q, not the site's key", got)
	}
	staleKey(t, hs)
	mustKubectl(t, "", "delete", "configmap", knownHostsSource, "-n", hs)
	mustKubectl(t, "", "create", "configmap", knownHostsSource, "-n", hs, "--from-literal="+knownHostsKey+"=the namespace owner's own")
	mustKubectl(t, followProbe(hs), "create", "-f", "-")
	eventually(t, followBound, "the stale key copy in "+hs+" followed", func() (bool, string) {
		got := copyValue(t, "secret", hs, keySource, keyKey)
		return got == siteKey, "it holds " + got
	})
	copyNotFollowing(t, hs)
	for _, ns := range []string{marked, unmarked} {
		if got := copyValue(t, "secret", ns, keySource, keyKey); got != tenantsOwn {
			t.Errorf("the tenant's Secret %s/%s holds %q", ns, keySource, got)
		}
	}

	// Deleted, as the follower once asked of a copy it could not follow, the tenant's Secret is
	// not made again: the refused copy of the honest namespace, deleted after it, is.
	mustKubectl(t, "", as, "delete", "secret", keySource, "-n", unmarked)
	mustKubectl(t, "", "delete", "configmap", knownHostsSource, "-n", hs)
	eventually(t, recheck+followBound, "the known-hosts copy of "+hs+" made again once deleted", func() (bool, string) {
		got := copyValue(t, "configmap", hs, knownHostsSource, knownHostsKey)
		return got == siteHosts, "it holds " + got
	})
	if ok, out := exists(t, "secret", keySource, "-n", unmarked); ok {
		t.Errorf("the follower made a Secret in the tenant's namespace once it was deleted: %s (holding %q)", out, copyValue(t, "secret", unmarked, keySource, keyKey))
	}
	if got := copyValue(t, "secret", marked, keySource, keyKey); got != tenantsOwn {
		t.Errorf("the tenant's Secret %s/%s holds %q", marked, keySource, got)
	}
	followerLeft(t, cluster.sg.Log, hs, marked, unmarked)
}

// podNamespacesLabel marks the namespaces the policy of TestATenantsForgedShadowGetsNoCopyInPodNamespaceMode
// lets use no virtual node.
const podNamespacesLabel = "e2e.shadowgate.interlink.eu/untrusted"

// servePodNamespaceMode runs, in the suite serve's place (its port, certificate and lease), a
// serve installed with copies into pod namespaces, until the test ends: with
// --credentials-in-pod-namespaces=true and the least-privilege policy's copiesInPodNamespaces
// true, as the kustomize component credentials-in-pod-namespaces sets them, and policy as its
// policy. The suite's serve is started again afterwards, as it was.
func servePodNamespaceMode(t *testing.T, policy string) *harness.Shadowgate {
	t.Helper()
	mustKubectl(t, "", "create", "configmap", "pod-namespace-mode-policy", "-n", "shadowgate-system", "--from-literal=policy.yaml="+policy)
	copiesInPodNamespaces := func(v string) string {
		return `[{"op":"test","path":"/spec/variables/1/name","value":"copiesInPodNamespaces"},{"op":"replace","path":"/spec/variables/1/expression","value":"` + v + `"}]`
	}
	mustKubectl(t, "", "patch", "validatingadmissionpolicy", "shadowgate-least-privilege", "--type=json", "-p", copiesInPodNamespaces("true"))
	t.Cleanup(func() {
		mustKubectl(t, "", "patch", "validatingadmissionpolicy", "shadowgate-least-privilege", "--type=json", "-p", copiesInPodNamespaces("false"))
		kubectl(t, "", "delete", "configmap", "pod-namespace-mode-policy", "-n", "shadowgate-system", "--ignore-not-found")
	})
	return serveInSuitesPlace(t, "serve with copies into pod namespaces", "--credentials-in-pod-namespaces=true", "--policy-configmap=pod-namespace-mode-policy")
}

// serveInSuitesPlace runs, in the suite serve's place (its port, certificate and lease), a
// serve with args, what it is called in the test's messages, until the test ends, once it
// leads; the suite's serve is started again afterwards, as it was.
func serveInSuitesPlace(t *testing.T, what string, args ...string) *harness.Shadowgate {
	t.Helper()
	if err := cluster.sg.Stop(); err != nil {
		t.Fatalf("stopping the suite's serve: %v", err)
	}
	t.Cleanup(func() {
		if err := cluster.sg.Restart(); err != nil {
			t.Errorf("starting the suite's serve again: %v", err)
		}
	})
	s, err := harness.Serve(cluster.kubectl, cluster.cp, harness.ServeOptions{Bin: cluster.bin, Dir: t.TempDir(), GracePeriod: gracePeriod,
		Port: cluster.sg.Port, CertDir: cluster.sg.CertDir, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("%s did not stop cleanly: %v", what, err)
		}
	})
	// The reconciler and the follower run on the leader: the suite's serve gave the lease up
	// as it stopped.
	eventually(t, time.Minute, what+" leads", func() (bool, string) {
		return strings.Contains(readLog(t, s.Log), "Successfully acquired lease"), "no such line in " + s.Log
	})
	return s
}

// The same tenant where shadowgate is installed with copies into pod namespaces, its namespace
// one no virtual node allows: beside the labelled Deployment and the annotated Secret it makes
// a pod asking for its shadow beside it, which it cannot place on a virtual node, and a
// Deployment at the name of that pod's shadow, labelled with the pod's UID. Its Secret keeps
// what it holds, by the time the follower has updated a stale copy beside an honest pod of an
// allowed namespace, whose shadow lives beside it too.
func TestATenantsForgedShadowGetsNoCopyInPodNamespaceMode(t *testing.T) {
	const ns, honestNS, tenant = "forge-podns", "forge-podns-honest", "forger"
	createNamespaces(t, ns, honestNS)
	t.Cleanup(func() { kubectl(t, "", "delete", "namespace", ns, honestNS, "--wait=false", "--ignore-not-found") })
	mustKubectl(t, "", "label", "namespace", ns, podNamespacesLabel+"=true")
	grantEdit(t, tenant, ns)
	selector := "    AllowedNamespaceSelector:\n      matchExpressions: [{key: " + podNamespacesLabel + ", operator: DoesNotExist}]\n    Network:\n"
	s := servePodNamespaceMode(t, strings.ReplaceAll(examplePolicyDocument(t), "    Network:\n", selector))
	// Their pods go before the suite's serve, which refuses shadows beside their pods, is back.
	t.Cleanup(func() {
		for _, n := range []string{ns, honestNS} {
			kubectl(t, "", "delete", "pods", "--all", "-n", n, "--wait=false")
		}
	})
	as := "--as=" + tenant

	pod := offloaded{name: "notebook", namespace: ns, node: "hpc-vk", ports: []int32{8888}, annotations: map[string]string{"interlink.eu/shadow-same-ns": "true"}}
	r := kubectl(t, pod.json(), as, "apply", "-f", "-")
	if r.Err == nil || !strings.Contains(r.Stderr, "may not use virtual node hpc-vk") {
		t.Fatalf("the tenant's pod on hpc-vk was not refused for its namespace:\n%s", r.Output())
	}
	mustKubectl(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: notebook, namespace: "+ns+", annotations: {interlink.eu/shadow-same-ns: \"true\"}}\n"+
		"spec: {containers: [{name: main, image: busybox, ports: [{containerPort: 8888}]}]}\n", as, "create", "-f", "-")
	uid := mustKubectl(t, "", "get", "pod", "notebook", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	mustKubectl(t, plantedSecret(ns, true), as, "create", "-f", "-")
	plant(t, tenant, plantedDeployment(ns, "tunnel", "")+"---\n"+plantedDeployment(ns, inject.ShadowName("notebook", ns, true), uid))

	siteKey := copyValue(t, "secret", "shadowgate-system", keySource, keyKey)
	honest := offloaded{name: "notebook", namespace: honestNS, node: "hpc-vk", ports: []int32{8888}, annotations: map[string]string{"interlink.eu/shadow-same-ns": "true"}}
	mustKubectl(t, honest.json(), "apply", "-f", "-")
	if got := copyValue(t, "secret", honestNS, keySource, keyKey); got != siteKey {
		t.Fatalf("the honest pod's namespace holds %q, not the site's key", got)
	}
	staleKey(t, honestNS)
	mustKubectl(t, followProbe(honestNS), "create", "-f", "-")
	eventually(t, followBound, "the stale key copy beside the honest pod followed", func() (bool, string) {
		got := copyValue(t, "secret", honestNS, keySource, keyKey)
		return got == siteKey, "it holds " + got
	})
	if got := copyValue(t, "secret", ns, keySource, keyKey); got != tenantsOwn {
		t.Errorf("the tenant's Secret %s/%s holds %q", ns, keySource, got)
	}
	followerLeft(t, s.Log, honestNS, ns)
}
