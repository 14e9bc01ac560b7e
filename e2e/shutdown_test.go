package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// SIGTERM lets an admission in flight finish: the replica is stopped while its shadow apply
// waits on a slow webhook of the API server's, and the admission still comes back allowed,
// and the replica exits cleanly.
func TestShutdownFinishesAdmissionsInFlight(t *testing.T) {
	createNamespaces(t, "shutdown")
	held, release := make(chan struct{}, 1), make(chan struct{})
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &review)
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer slow.Close()
	// Whatever fails, the held request is let go before slow.Close waits for it.
	releaseHeld := sync.OnceFunc(func() { close(release) })
	defer releaseHeld()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: slow.Certificate().Raw}))
	mustKubectl(t, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"e2e-slow"},
"webhooks":[{"name":"slow.e2e.test","admissionReviewVersions":["v1"],"sideEffects":"None","failurePolicy":"Ignore","timeoutSeconds":10,
"clientConfig":{"url":"`+slow.URL+`","caBundle":"`+ca+`"},
"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"shutdown-shadow"}},
"rules":[{"apiGroups":["apps"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["deployments"]}]}]}`, "apply", "-f", "-")
	defer mustKubectl(t, "", "delete", "validatingwebhookconfiguration", "e2e-slow")

	b, err := harness.Serve(cluster.kubectl, cluster.cp, harness.ServeOptions{Bin: cluster.bin, Dir: t.TempDir(), GracePeriod: gracePeriod})
	if err != nil {
		t.Fatal(err)
	}
	p := offloaded{name: "trainer", namespace: "shutdown", node: "hpc-vk", ports: []int32{8888}}
	pod := []byte(p.json())
	// The API server has given the pod its UID by the time /validate-pods sees it.
	pod = bytes.Replace(pod, []byte(`"namespace":"shutdown"`), []byte(`"namespace":"shutdown","uid":"8f7a1c5e-0000-4000-8000-000000000001"`), 1)
	review := harness.PodCreateReview("in-flight", "shutdown", "trainer", pod)
	answered := make(chan *admissionv1.AdmissionResponse, 1)
	go func() {
		defer close(answered)
		r, err := b.Review("/validate-pods", 15*time.Second, "application/json", review)
		if err != nil {
			t.Errorf("the admission in flight was cut off: %v", err)
			return
		}
		answered <- r
	}()
	select {
	case <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("the shadow Deployment never reached the slow webhook")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- b.Stop() }()
	// Release the admission only once the webhook server is shutting down, so it is one that
	// shutdown has to wait for.
	eventually(t, 15*time.Second, "the replica begins shutting down its webhook server", func() (bool, string) {
		log, err := os.ReadFile(b.Log)
		return err == nil && bytes.Contains(log, []byte("Shutting down webhook server")), fmt.Sprintf("no such line in %s (%v)", b.Log, err)
	})
	releaseHeld()
	if r := <-answered; r == nil || !r.Allowed || r.UID != "in-flight" {
		t.Errorf("the admission in flight did not come back allowed: %+v", r)
	}
	if err := <-stopped; err != nil {
		t.Errorf("the replica did not exit cleanly: %v", err)
	}
}
