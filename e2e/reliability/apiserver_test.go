package reliability

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/webhook"
)

// The API server is killed while shadowgate applies a pod's shadow, after the node ConfigMap,
// Service and NetworkPolicy and while the Deployment's apply is held: the admission is still answered
// within the webhook's timeout, denied with a message naming the apply that failed. Once the
// API server is back, the reconciler collects the objects applied before the stop, so no
// partial shadow remains. (The applier's own removal of a refused pod's objects runs right
// after the denial, while the API server is still down, so it cannot be what collects them.)
func TestAPIServerStoppedDuringAShadowApplyDeniesThePodAndLeavesNoPartialShadow(t *testing.T) {
	ctx := harness.TestContext(t, 5*time.Minute)
	// Whatever fails below, later tests find serve running.
	t.Cleanup(func() { restartServeIfExited(t) })
	const namespace = "apistop"
	cluster.Kubectl.CreateNamespaces(ctx, t, namespace)
	config, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "shadowgate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var timeout time.Duration
	for _, w := range config.Webhooks {
		if strings.HasSuffix(*w.ClientConfig.URL, webhook.PathValidatePods) {
			timeout = time.Duration(*w.TimeoutSeconds) * time.Second
		}
	}
	if timeout == 0 {
		t.Fatalf("no webhook of %s calls %s", config.Name, webhook.PathValidatePods)
	}
	shadow := inject.ShadowName("trainer", namespace, false)
	shadowNS := inject.ShadowNamespace(namespace, false)
	hold := holdDeploymentCreates(ctx, t, namespace)

	pod := bench.TypicalPod("trainer", namespace, true, false)
	pod.UID = "5d0c3a1e-0000-4000-8000-00000000a915" // given by the API server before the webhooks
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		r    *admissionv1.AdmissionResponse
		err  error
		took time.Duration
	}
	answered := make(chan answer, 1)
	sent := time.Now()
	go func() {
		r, err := cluster.SG.Review(webhook.PathValidatePods, timeout, "application/json",
			harness.PodCreateReview("apistop", namespace, pod.Name, raw))
		answered <- answer{r, err, time.Since(sent)}
	}()
	harness.Eventually(t, time.Minute, "the shadow Deployment's apply held by the holding webhook", func() (bool, string) {
		select {
		case a := <-answered:
			t.Fatalf("answered before the Deployment's apply was held: %+v %v", a.r, a.err)
		default:
		}
		return len(hold.heldPods()) > 0, "nothing held"
	})
	// What was applied before the stop: the objects the Deployment mounts go first.
	partial := 0
	if _, err := kube.CoreV1().Services(shadowNS).Get(ctx, shadow, metav1.GetOptions{}); err == nil {
		partial++
	}
	if _, err := kube.CoreV1().ConfigMaps(shadowNS).Get(ctx, inject.NodeConfigMapName(shadow), metav1.GetOptions{}); err == nil {
		partial++
	}
	if _, err := kube.NetworkingV1().NetworkPolicies(shadowNS).Get(ctx, shadow, metav1.GetOptions{}); err == nil {
		partial++
	}
	if partial != 3 {
		t.Fatalf("want the Service, node ConfigMap and NetworkPolicy applied before the Deployment, found %d of them", partial)
	}

	killed := time.Now()
	cluster.CP.KillAPIServer()
	a := <-answered
	// The API server is back before any check can fail, so later tests find it running.
	if err := cluster.CP.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	down := time.Since(killed)
	hold.release()
	if a.err != nil {
		t.Fatalf("no answer: %v", a.err)
	}
	if a.took > timeout {
		t.Errorf("answered after %s, beyond the webhook's timeout of %s", a.took, timeout)
	}
	failure := "applying Deployment " + shadowNS + "/" + shadow + ": "
	if a.r.Allowed || a.r.Result == nil || !strings.Contains(a.r.Result.Message, failure) {
		t.Fatalf("want a denial naming %q, got %+v", failure, a.r)
	}
	// The lease holder exits once it could not renew the lease for controller-runtime's renew
	// deadline (10 s), so that two replicas never both reconcile; on loaded cores that may be
	// seconds after the API server is back. In a cluster the kubelet then restarts it, as
	// here, for as long as the test waits. An exit for any other reason fails the test.
	serveRestarts := 0
	restartIfLeaseLost := func() {
		if err := cluster.SG.Exited(); err != nil {
			if !strings.Contains(err.Error(), "leader election lost") {
				t.Fatalf("serve did not survive the API server's restart: %v", err)
			}
			if err := cluster.SG.Restart(); err != nil {
				t.Fatal(err)
			}
			serveRestarts++
		}
	}

	// The pod was never stored: after the grace period its shadow objects are orphans.
	var left harness.ShadowAudit
	gone := harness.Eventually(t, 3*time.Minute+gracePeriod, "the reconciler collects the partial shadow", func() (bool, string) {
		restartIfLeaseLost()
		left = audit(ctx, t, namespace)
		return left.Objects == 0, left.String()
	}, func() string { return "serve's log: " + cluster.SG.Log })
	restartIfLeaseLost() // a lease lost just as the wait ended counts too
	// The reconciler logs a deletion once the API server has answered it, so the last line may
	// trail the audit that found the objects gone: give the lines a bounded while to arrive.
	collected := reconcilerDeletions(t, string(pod.UID))
	for deadline := time.Now().Add(30 * time.Second); collected < partial && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		collected = reconcilerDeletions(t, string(pod.UID))
	}
	if collected != partial {
		t.Errorf("the reconciler logged %d deletions of the pod's shadow objects, want the %d applied before the stop (see %s)", collected, partial, cluster.SG.Log)
	}
	t.Logf("denied in %s: %s; API server down for %s; partial shadow (%d objects) collected by the reconciler %s after it was back; serve restarted %d times",
		a.took.Round(time.Millisecond), a.r.Result.Message, down.Round(time.Millisecond), partial, gone.Round(time.Millisecond), serveRestarts)
	harness.Scenario("apiserver-stop-during-apply", "answered_ms", a.took.Milliseconds(), "timeout_s", int(timeout.Seconds()),
		"apiserver_down_ms", down.Milliseconds(), "serve_restarts", serveRestarts,
		"denied", !a.r.Allowed, "partial_objects", partial, "collected_by_reconciler", collected, "left_after_reconcile", left.Objects,
		"collected_s", int(gone.Seconds()))
}

// reconcilerDeletions counts the reconciler's log lines of deleting a shadow object of the pod
// with uid, in serve's log (one file across restarts).
func reconcilerDeletions(t *testing.T, uid string) int {
	t.Helper()
	log, err := os.ReadFile(cluster.SG.Log)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(log)) {
		if strings.Contains(line, "deleted shadow object whose pod is gone") && strings.Contains(line, uid) {
			n++
		}
	}
	return n
}
