package e2e

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
)

// followBound is how soon every copy of a rotated source holds its content, for up to 100
// shadow namespaces (internal/controllers/follower/follower.go's rate; docs/security.md, "When a source changes").
const followBound = 10 * time.Second

// recheck is how often a copy that cannot follow is looked at again (internal/controllers/follower/follower.go).
const recheck = 30 * time.Second

// The sources of the example policy's hpc-vk, and the keys the copies hold them under.
const (
	keySource        = "hpc-ssh-key"
	keyKey           = "id_ed25519"
	knownHostsSource = "hpc-known-hosts"
	knownHostsKey    = "known_hosts"
)

// A rotated key and known-hosts file reach the copies of two shadows in two namespaces within
// the bound, marker kept; a copy that cannot follow (someone else's object, an immutable copy)
// is left alone and said so on the source, and made again once deleted; and nothing is written while the sources change
// only in metadata, are applied again unchanged, or a new shadow mounts copies already current.
func TestCopiesFollowTheirSource(t *testing.T) {
	pods := []offloaded{
		{name: "trainer", namespace: "rotate-a", node: "hpc-vk", ports: []int32{8888}},
		{name: "trainer", namespace: "rotate-b", node: "hpc-vk", ports: []int32{8888}},
		{name: "trainer", namespace: "rotate-c", node: "hpc-vk", ports: []int32{8888}},
	}
	restoreSources(t)
	for _, p := range pods {
		createNamespaces(t, p.namespace)
		t.Cleanup(func() {
			kubectl(t, "", "delete", "namespace", p.namespace, p.shadowNamespace(), "--wait=false", "--ignore-not-found")
		})
		mustKubectl(t, p.json(), "apply", "-f", "-")
	}
	following, refusing := pods[:2], pods[2]
	// rotate-c's copies are made so they cannot follow: its key copy frozen, its known-hosts
	// copy replaced by an object of someone else's.
	mustKubectl(t, "", "patch", "secret", keySource, "-n", refusing.shadowNamespace(), "--type=merge", "-p", `{"immutable":true}`)
	mustKubectl(t, "", "delete", "configmap", knownHostsSource, "-n", refusing.shadowNamespace())
	mustKubectl(t, "", "create", "configmap", knownHostsSource, "-n", refusing.shadowNamespace(), "--from-literal="+knownHostsKey+"=the namespace owner's own")

	series := []string{
		`shadowgate_credential_copies_followed_total{kind="Secret",result="updated"}`,
		`shadowgate_credential_copies_followed_total{kind="ConfigMap",result="updated"}`,
		`shadowgate_credential_copies_followed_total{kind="Secret",result="refused"}`,
		`shadowgate_credential_copies_followed_total{kind="ConfigMap",result="refused"}`,
	}
	before := metricValues(t, series)
	newKey := "rotated key " + strconv.FormatInt(time.Now().UnixNano(), 36)
	newHosts := "login.hpc.example.org ssh-ed25519 AAAArotated" + strconv.FormatInt(time.Now().UnixNano(), 36)
	setSource(t, "secret", keySource, keyKey, base64.StdEncoding.EncodeToString([]byte(newKey)))
	setSource(t, "configmap", knownHostsSource, knownHostsKey, newHosts)
	took := harness.Eventually(t, followBound, "every copy holds the rotated key and known hosts", func() (bool, string) {
		for _, p := range following {
			if got := copyValue(t, "secret", p.shadowNamespace(), keySource, keyKey); got != newKey {
				return false, fmt.Sprintf("%s/%s holds %q", p.shadowNamespace(), keySource, got)
			}
			if got := copyValue(t, "configmap", p.shadowNamespace(), knownHostsSource, knownHostsKey); got != newHosts {
				return false, fmt.Sprintf("%s/%s holds %q", p.shadowNamespace(), knownHostsSource, got)
			}
		}
		return true, ""
	})
	t.Logf("two shadow namespaces' copies followed their sources in %s (bound %s)", took.Round(time.Millisecond), followBound)
	for _, p := range following {
		for _, kind := range []string{"secret/" + keySource, "configmap/" + knownHostsSource} {
			if got := mustKubectl(t, "", "get", kind, "-n", p.shadowNamespace(), "-o", `jsonpath={.metadata.annotations.interlink\.eu/replicated-from}`); got != "shadowgate-system/"+strings.TrimPrefix(strings.TrimPrefix(kind, "secret/"), "configmap/") {
				t.Errorf("%s in %s lost its marker: %q", kind, p.shadowNamespace(), got)
			}
		}
	}

	// The refused copies keep what they held, and the sources say why and what to do.
	if got := copyValue(t, "configmap", refusing.shadowNamespace(), knownHostsSource, knownHostsKey); got != "the namespace owner's own" {
		t.Errorf("someone else's ConfigMap in %s was overwritten: %q", refusing.shadowNamespace(), got)
	}
	if got := copyValue(t, "secret", refusing.shadowNamespace(), keySource, keyKey); got == newKey {
		t.Errorf("the immutable copy in %s took the new key", refusing.shadowNamespace())
	}
	wantNotes := map[string]string{
		"ConfigMap/" + knownHostsSource: "the copy ConfigMap " + refusing.shadowNamespace() + "/" + knownHostsSource + " does not follow this configmap, and the shadows there keep what it holds: " +
			"refusing to overwrite configmap " + refusing.shadowNamespace() + "/" + knownHostsSource + ": it already exists, holds different content and was not created by shadowgate: " +
			"if it is not the site's own, delete it (kubectl delete configmap -n " + refusing.shadowNamespace() + " " + knownHostsSource + ") and shadowgate copies the source again",
		"Secret/" + keySource: "is immutable, so it cannot take the source's new content: delete the copy (kubectl delete secret -n " + refusing.shadowNamespace() + " " + keySource + ")",
	}
	eventually(t, followBound, "a CopyNotFollowing Event on each source naming rotate-c's copy and the remedy", func() (bool, string) {
		out := mustKubectl(t, "", "get", "events.events.k8s.io", "-n", "shadowgate-system", "--field-selector", "reason=CopyNotFollowing",
			"-o", `jsonpath={range .items[*]}{.type} {.regarding.kind}/{.regarding.name}: {.note}{"\n"}{end}`)
		for regarding, note := range wantNotes {
			found := false
			for line := range strings.Lines(out) {
				found = found || (strings.HasPrefix(line, "Warning "+regarding+": ") && strings.Contains(line, note))
			}
			if !found {
				return false, "no Warning on " + regarding + " saying " + note + "; the Events:\n" + out
			}
		}
		return true, ""
	})
	if log := readLog(t, cluster.sg.Log); !strings.Contains(log, "a credential copy does not follow its source") || !strings.Contains(log, refusing.shadowNamespace()+"/"+knownHostsSource) {
		t.Errorf("serve logged no line naming the refused copy %s/%s", refusing.shadowNamespace(), knownHostsSource)
	}
	after := metricValues(t, series)
	for s, want := range map[string]float64{series[0]: 2, series[1]: 2, series[2]: 1, series[3]: 1} {
		if after[s]-before[s] < want {
			t.Errorf("%s went from %v to %v, want %v more", s, before[s], after[s], want)
		}
	}

	// Looked at again while they still cannot follow, they are not said again.
	rechecked := `controller_runtime_reconcile_total{controller="credential-copies",result="requeue_after"}`
	said, rechecks := metricValues(t, series[2:]), metricValues(t, []string{rechecked})[rechecked]
	eventually(t, recheck+followBound, "the refused copies looked at again", func() (bool, string) {
		now := metricValues(t, []string{rechecked})[rechecked]
		return now >= rechecks+2, fmt.Sprintf("%s went from %v to %v", rechecked, rechecks, now)
	})
	if again := metricValues(t, series[2:]); again[series[2]] != said[series[2]] || again[series[3]] != said[series[3]] {
		t.Errorf("copies that still cannot follow were said again at their recheck: %v, then %v", said, again)
	}

	// Deleted, as the Events say, the refused copies are made again from the source, with no
	// pod or change of the source to bring them.
	mustKubectl(t, "", "delete", "secret/"+keySource, "configmap/"+knownHostsSource, "-n", refusing.shadowNamespace())
	eventually(t, recheck+followBound, "rotate-c's copies made again once deleted", func() (bool, string) {
		key := copyValue(t, "secret", refusing.shadowNamespace(), keySource, keyKey)
		hosts := copyValue(t, "configmap", refusing.shadowNamespace(), knownHostsSource, knownHostsKey)
		return key == newKey && hosts == newHosts, fmt.Sprintf("key %q, known hosts %q", key, hosts)
	})

	// Nothing is written for copies already current: the copies keep their resourceVersions,
	// and the API server counts no update of a Secret or ConfigMap (copies are updated with
	// PUT; shadowgate writes no other Secret or ConfigMap that way, and this test none).
	versions := func() string {
		var out []string
		for _, p := range following {
			out = append(out, mustKubectl(t, "", "get", "secret/"+keySource, "configmap/"+knownHostsSource, "-n", p.shadowNamespace(),
				"-o", `jsonpath={range .items[*]}{.metadata.resourceVersion} {end}`))
		}
		return strings.Join(out, "| ")
	}
	checked := `controller_runtime_reconcile_total{controller="credential-copies",result="success"}`
	rvs, puts, checks := versions(), apiserverUpdates(t), metricValues(t, []string{checked})[checked]
	hostsManifest := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + knownHostsSource + ", namespace: shadowgate-system}\ndata: {" + knownHostsKey + ": \"" + newHosts + "\"}\n"
	for range 2 { // the first apply takes its fields over, the second changes nothing at all
		mustKubectl(t, hostsManifest, "apply", "--server-side", "--field-manager=e2e-rotation", "--force-conflicts", "-f", "-")
	}
	mustKubectl(t, "", "annotate", "secret", keySource, "-n", "shadowgate-system", "example.org/rotated-by=e2e", "--overwrite")
	// A second shadow in rotate-a has the follower check rotate-a's copies, which are current.
	second := offloaded{name: "second", namespace: following[0].namespace, node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, second.json(), "apply", "-f", "-")
	eventually(t, followBound, "the follower checks the copies the new shadow mounts", func() (bool, string) {
		now := metricValues(t, []string{checked})[checked]
		return now >= checks+2, fmt.Sprintf("%s went from %v to %v", checked, checks, now)
	})
	if got := versions(); got != rvs {
		t.Errorf("copies already current were written: resourceVersions %s, then %s", rvs, got)
	}
	if got := apiserverUpdates(t); got != puts {
		t.Errorf("the API server counted %v updates of Secrets and ConfigMaps while every copy was current", got-puts)
	}
}

// restoreSources puts the rotated sources back as they were when the test ends, so the tests
// after it see the dev overlay's credentials.
func restoreSources(t *testing.T) {
	t.Helper()
	key := mustKubectl(t, "", "get", "secret", keySource, "-n", "shadowgate-system", "-o", "jsonpath={.data."+keyKey+"}")
	hosts := mustKubectl(t, "", "get", "configmap", knownHostsSource, "-n", "shadowgate-system", "-o", "jsonpath={.data."+knownHostsKey+"}")
	t.Cleanup(func() {
		setSource(t, "secret", keySource, keyKey, key)
		setSource(t, "configmap", knownHostsSource, knownHostsKey, hosts)
	})
}

// setSource sets one key of a source in shadowgate-system, base64 already for a Secret.
func setSource(t *testing.T, kind, name, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"data":{%q:%q}}`, key, value)
	mustKubectl(t, "", "patch", kind, name, "-n", "shadowgate-system", "--type=merge", "-p", patch)
}

// copyValue is one key of a copy, decoded for a Secret; empty when the copy is missing.
func copyValue(t *testing.T, kind, namespace, name, key string) string {
	t.Helper()
	r := kubectl(t, "", "get", kind, name, "-n", namespace, "-o", "jsonpath={.data."+key+"}")
	if r.Err != nil {
		return ""
	}
	if kind != "secret" {
		return r.Stdout
	}
	b, err := base64.StdEncoding.DecodeString(r.Stdout)
	if err != nil {
		t.Fatalf("%s %s/%s: %v", kind, namespace, name, err)
	}
	return string(b)
}

// apiserverUpdates is the API server's count of updates (PUT) of Secrets and ConfigMaps.
func apiserverUpdates(t *testing.T) float64 {
	t.Helper()
	var sum float64
	for line := range strings.Lines(mustKubectl(t, "", "get", "--raw", "/metrics")) {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `verb="PUT"`) ||
			!(strings.Contains(line, `resource="secrets"`) || strings.Contains(line, `resource="configmaps"`)) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}

// boundNamespaces is how many shadow namespaces the bound is stated and measured for.
const boundNamespaces = 100

// A rotated key reaches its copies in 100 shadow namespaces within the bound, and no sooner
// than the follower's rate allows: the writes are paced, not a burst of 100. The namespaces
// hold what the follower looks at, made directly: each the shadow namespace of a pod namespace,
// marked for it as an admin hands one over, with a shadow Deployment mounting the key and a
// copy of it marked as shadowgate marks its copies.
func TestCopiesFollowTheirSourceWithinTheBound(t *testing.T) {
	restoreSources(t)
	const label = "e2e-rotation=bound"
	var objs []string
	var names []string
	for i := range boundNamespaces {
		podNS := fmt.Sprintf("bound-%03d", i)
		ns := inject.ShadowNamespace(podNS, false)
		names = append(names, ns)
		objs = append(objs,
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+", labels: {interlink.eu/shadow-namespace-for: "+podNS+"}}\n",
			"apiVersion: v1\nkind: Secret\nmetadata: {name: "+keySource+", namespace: "+ns+", labels: {e2e-rotation: bound}, annotations: {interlink.eu/replicated-from: shadowgate-system/"+keySource+"}}\n"+
				"stringData: {"+keyKey+": before}\n",
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: shadow, namespace: "+ns+", labels: {app.kubernetes.io/managed-by: shadowgate}}\n"+
				"spec:\n  selector: {matchLabels: {app: s}}\n  template:\n    metadata: {labels: {app: s}}\n    spec:\n"+
				"      containers: [{name: c, image: "+shadowImage+"}]\n"+
				"      volumes: [{name: key, projected: {sources: [{secret: {name: "+keySource+"}}]}}]\n")
	}
	t.Cleanup(func() {
		kubectl(t, "", append([]string{"delete", "namespace", "--wait=false", "--ignore-not-found"}, names...)...)
	})
	mustKubectl(t, strings.Join(objs, "---\n"), "create", "-f", "-")
	// Created directly, the copies differ from the source: the follower brings them to it as
	// it sees each Deployment. Once all hold the source, the rotation is timed.
	current := func(want string) func() (bool, string) {
		return func() (bool, string) {
			out := mustKubectl(t, "", "get", "secrets", "-A", "-l", label, "-o", "jsonpath={range .items[*]}{.data."+keyKey+"}{\"\\n\"}{end}")
			behind := 0
			for line := range strings.Lines(out) {
				if b, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(line)); string(b) != want {
					behind++
				}
			}
			return behind == 0 && strings.Count(out, "\n") == boundNamespaces, fmt.Sprintf("%d of %d copies behind", behind, strings.Count(out, "\n"))
		}
	}
	source := copyValue(t, "secret", "shadowgate-system", keySource, keyKey)
	eventually(t, time.Minute, "every copy holds the source before the rotation", current(source))
	newKey := "rotated key " + strconv.FormatInt(time.Now().UnixNano(), 36)
	setSource(t, "secret", keySource, keyKey, base64.StdEncoding.EncodeToString([]byte(newKey)))
	took := harness.Eventually(t, followBound, fmt.Sprintf("all %d copies hold the rotated key", boundNamespaces), current(newKey))
	t.Logf("%d shadow namespaces' copies followed the rotated key in %s (bound %s)", boundNamespaces, took.Round(time.Millisecond), followBound)
	// 20 a second past a burst of 20 (internal/controllers/follower/follower.go): 80 copies wait at least 4 s.
	if paced := 3500 * time.Millisecond; took < paced {
		t.Errorf("%d copies followed in %s, faster than the follower's rate allows (%s): its writes are not paced", boundNamespaces, took, paced)
	}
}
