package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// inFlightBudget is the held admission's timeout: the longest the API server allows a webhook
// (30 s), well above the drain before shutdown begins.
const inFlightBudget = 30 * time.Second

// SIGTERM lets an admission in flight finish: the replica is stopped while its shadow apply
// waits on a slow webhook of the API server's, and the admission still comes back allowed,
// and the replica exits cleanly.
func TestShutdownFinishesAdmissionsInFlight(t *testing.T) {
	createNamespaces(t, "shutdown")
	held, release := make(chan struct{}, 1), make(chan struct{})
	url, ca := harness.StartAdmissionServer(t, func(review *admissionv1.AdmissionReview) {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	})
	// Whatever fails, the held request is let go before the server waits for it.
	releaseHeld := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseHeld)
	cfg, err := json.Marshal(harness.WebhookConfiguration("e2e-slow", url, ca, "shutdown-shadow", "apps", "deployments"))
	if err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, string(cfg), "apply", "-f", "-")
	defer mustKubectl(t, "", "delete", "validatingwebhookconfiguration", "e2e-slow")

	b, err := harness.Serve(cluster.kubectl, cluster.cp, harness.ServeOptions{Bin: cluster.bin, Dir: t.TempDir(), GracePeriod: gracePeriod})
	if err != nil {
		t.Fatal(err)
	}
	// Stopped by the test below; this is for a failure on the way, which would leave it running.
	t.Cleanup(func() { _ = b.Stop() })
	p := offloaded{name: "trainer", namespace: "shutdown", node: "hpc-vk", ports: []int32{8888}}
	pod := []byte(p.json())
	// The API server has given the pod its UID by the time /validate-pods sees it.
	pod = bytes.Replace(pod, []byte(`"namespace":"shutdown"`), []byte(`"namespace":"shutdown","uid":"8f7a1c5e-0000-4000-8000-000000000001"`), 1)
	review := harness.PodCreateReview("in-flight", "shutdown", "trainer", pod)
	answered := make(chan *admissionv1.AdmissionResponse, 1)
	go func() {
		defer close(answered)
		// The admission's budget covers the drain (--shutdown-delay, 3 s) before shutdown
		// begins, and the wait for that on loaded cores: generous, since it is not what is
		// measured.
		r, err := b.Review("/validate-pods", inFlightBudget, "application/json", review)
		if err != nil {
			t.Errorf("the admission in flight was cut off: %v", err)
			return
		}
		answered <- r
	}()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the shadow Deployment never reached the slow webhook")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- b.Stop() }()
	// Release the admission only once the webhook server is shutting down, so it is one that
	// shutdown has to wait for.
	eventually(t, inFlightBudget-5*time.Second, "the replica begins shutting down its webhook server", func() (bool, string) {
		log, err := os.ReadFile(b.Log)
		return err == nil && bytes.Contains(log, []byte("Shutting down webhook server")), fmt.Sprintf("no such line in %s (%v)", b.Log, err)
	})
	releaseHeld()
	r := <-answered
	if r == nil || !r.Allowed || r.UID != "in-flight" {
		t.Errorf("the admission in flight did not come back allowed: %+v", r)
	}
	stopErr := <-stopped
	if stopErr != nil {
		t.Errorf("the replica did not exit cleanly: %v", stopErr)
	}
	harness.Scenario("sigterm-in-flight", "in_flight", 1, "allowed_after_sigterm", r != nil && r.Allowed, "clean_exit", stopErr == nil)
}
