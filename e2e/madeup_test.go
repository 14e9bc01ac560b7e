package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/webhook"
)

// madeUpReview sends serve the CREATE review of pod p, with uid, straight to /validate-pods,
// as anything that reaches the webhook port can: no pod follows it.
func madeUpReview(t *testing.T, sg *harness.Shadowgate, p offloaded, uid string) *admissionv1.AdmissionResponse {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(p.json()), &obj); err != nil {
		t.Fatal(err)
	}
	obj["metadata"].(map[string]any)["uid"] = uid
	got, err := sg.Review(webhook.PathValidatePods, 10*time.Second, "application/json", harness.PodCreateReview(uid, p.namespace, p.name, mustMarshal(obj)))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// jsonpath is what kubectl get prints of the object with template, "" when it is not found.
func jsonpath(t *testing.T, template string, args ...string) string {
	t.Helper()
	r := kubectl(t, "", append([]string{"get", "-o", "jsonpath=" + template}, args...)...)
	if r.Err != nil {
		if strings.Contains(r.Stderr, "NotFound") {
			return ""
		}
		t.Fatalf("%v\n%s", r.Err, r.Output())
	}
	return r.Stdout
}

// Made-up reviews, sent straight to /validate-pods, make shadowgate apply shadows for pods that
// never come. Nothing they wrote outlives them: the reconciler collects their shadows after the
// grace period, and the collector then deletes the shadow namespace shadowgate created for a
// namespace that does not exist (here it stays Terminating: this package runs no namespace
// controller, which would remove it and what it holds) and the credential copies it made
// beside a real pod's shadow, whose own copies it leaves. The shadow namespace of a namespace
// that exists stays, empty, for that namespace's next pod; one an admin handed over is never
// deleted.
func TestAMadeUpReviewLeavesNothingBehind(t *testing.T) {
	createNamespaces(t, "keeper", "handed", "quiet")
	handOverShadowNamespaces(t, "handed")
	keeper := offloaded{name: "keeper", namespace: "keeper", node: "hpc-vk", ports: []int32{8888}}
	mustKubectl(t, keeper.json(), "apply", "-f", "-")
	ghosts := []offloaded{
		// Its namespace need not exist: shadowgate creates nowhere-shadow for it.
		{name: "ghost", namespace: "nowhere", node: "hpc-vk", ports: []int32{8888}},
		// Beside the keeper's shadow, on another node: copies of other credentials.
		{name: "ghost", namespace: "keeper", node: "cern-vk", ports: []int32{8888}},
		{name: "ghost", namespace: "handed", node: "hpc-vk", ports: []int32{8888}},
		{name: "ghost", namespace: "quiet", node: "hpc-vk", ports: []int32{8888}},
	}
	for i, g := range ghosts {
		if got := madeUpReview(t, cluster.sg, g, fmt.Sprintf("made-up-%d", i)); !got.Allowed {
			t.Fatalf("the made-up review of %s/%s was refused: %+v", g.namespace, g.name, got.Result)
		}
	}
	created := "{.metadata.labels.interlink\\.eu/created-by-shadowgate}"
	if got := jsonpath(t, created, "namespace", "nowhere-shadow"); got != "true" {
		t.Fatalf("nowhere-shadow is labelled created-by-shadowgate=%q, want true", got)
	}
	if got := jsonpath(t, created, "namespace", "handed-shadow"); got != "" {
		t.Fatalf("the handed-over namespace got created-by-shadowgate=%q", got)
	}
	for _, obj := range [][]string{{"secret", "cern-keytab"}, {"configmap", "krb5-config"}, {"secret", "hpc-ssh-key"}} {
		if got := jsonpath(t, created, append(obj, "-n", "keeper-shadow")...); got != "true" {
			t.Fatalf("%s keeper-shadow/%s is labelled created-by-shadowgate=%q, want true", obj[0], obj[1], got)
		}
	}
	before := metricValues(t, []string{`shadowgate_collected_total{kind="Namespace"}`, `shadowgate_collected_total{kind="Secret"}`})

	// The orphaned shadows go after a grace period, then two sweeps a grace period apart.
	eventually(t, 5*gracePeriod, "the made-up reviews' namespace and copies are deleted", func() (bool, string) {
		var left []string
		if jsonpath(t, "{.metadata.deletionTimestamp}", "namespace", "nowhere-shadow") == "" {
			left = append(left, "namespace nowhere-shadow is not being deleted")
		}
		for _, obj := range [][]string{{"secret", "cern-keytab", "keeper-shadow"}, {"configmap", "krb5-config", "keeper-shadow"},
			{"secret", "hpc-ssh-key", "handed-shadow"}, {"secret", "hpc-ssh-key", "quiet-shadow"}, {"configmap", "hpc-known-hosts", "quiet-shadow"}} {
			if ok, _ := exists(t, obj[0], obj[1], "-n", obj[2]); ok {
				left = append(left, obj[0]+" "+obj[2]+"/"+obj[1]+" is still there")
			}
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
	for _, obj := range [][]string{{"namespace", "keeper-shadow"}, {"secret", "hpc-ssh-key", "-n", "keeper-shadow"}, {"namespace", "handed-shadow"}, {"namespace", "quiet-shadow"}} {
		if jsonpath(t, "{.metadata.name}", obj...) == "" || jsonpath(t, "{.metadata.deletionTimestamp}", obj...) != "" {
			t.Errorf("%v, still used, handed over or of a live namespace, was deleted", obj)
		}
	}
	after := metricValues(t, []string{`shadowgate_collected_total{kind="Namespace"}`, `shadowgate_collected_total{kind="Secret"}`})
	for series, v := range after {
		if v <= before[series] {
			t.Errorf("%s is %v, as before the collection", series, v)
		}
	}
}

// A replica applies at most --max-unconfirmed-shadows shadows for pods the API server has not
// stored; past it a made-up review is refused with 429, naming the flag, and counted, until
// the shadows it counts are a grace period old. A second replica, with a limit of 2, stands
// for the suite's: its admissions answer like the leader's.
func TestShadowsForPodsNeverStoredAreBounded(t *testing.T) {
	b, err := harness.Serve(cluster.kubectl, cluster.cp, harness.ServeOptions{Bin: cluster.bin, Dir: t.TempDir(), GracePeriod: gracePeriod,
		Args: []string{"--max-unconfirmed-shadows=2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Stop(); err != nil {
			t.Errorf("the second replica did not stop cleanly: %v", err)
		}
	}()
	ghost := func(i int) offloaded {
		return offloaded{name: fmt.Sprintf("ghost-%d", i), namespace: "bounded", node: "hpc-vk", ports: []int32{8888}}
	}
	for i := range 2 {
		if got := madeUpReview(t, b, ghost(i), fmt.Sprintf("bounded-%d", i)); !got.Allowed {
			t.Fatalf("made-up review %d of 2 was refused: %+v", i, got.Result)
		}
	}
	first := time.Now()
	got := madeUpReview(t, b, ghost(2), "bounded-2")
	if got.Allowed || got.Result == nil || got.Result.Code != http.StatusTooManyRequests || !strings.Contains(got.Result.Message, "--max-unconfirmed-shadows") {
		t.Fatalf("the third made-up review: %+v, want a 429 naming --max-unconfirmed-shadows", got.Result)
	}
	if ok, _ := exists(t, "deployment", inject.ShadowName("ghost-2", "bounded", false), "-n", "bounded-shadow"); ok {
		t.Error("the refused review's shadow was applied")
	}
	m := metricValuesOf(t, b, []string{"shadowgate_unconfirmed_shadows", "shadowgate_unconfirmed_shadow_refusals_total"})
	if m["shadowgate_unconfirmed_shadows"] != 2 || m["shadowgate_unconfirmed_shadow_refusals_total"] != 1 {
		t.Errorf("the second replica's metrics: %v, want 2 unconfirmed and 1 refusal", m)
	}
	time.Sleep(gracePeriod - time.Since(first) + time.Second)
	if got := madeUpReview(t, b, ghost(3), "bounded-3"); !got.Allowed {
		t.Errorf("a grace period later a made-up review is still refused: %+v", got.Result)
	}
}
