package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
)

// heldCreates is a webhook of the API server's that holds Deployment creates in one namespace.
type heldCreates struct {
	release func() // lets every held create go, once

	mu      sync.Mutex
	podUIDs map[string]bool // the interlink.eu/pod-uid labels of the Deployments held
}

// heldPods are the UIDs of the pods whose shadow Deployment was held.
func (h *heldCreates) heldPods() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.podUIDs)
}

// probeName is the Deployment whose dry-run creates show that the API server calls the
// holding webhook; it is let through at once.
const probeName = "hold-probe"

// holdDeploymentCreates creates the shadow namespace of podNamespace, unless shadowgate has
// already, handed over to shadowgate as an admin would (marked for podNamespace), and registers
// a ValidatingWebhookConfiguration whose server holds every Deployment create there until
// release; it returns once the API server calls the server, and removes the configuration
// when the test ends.
func holdDeploymentCreates(ctx context.Context, t *testing.T, podNamespace string) *heldCreates {
	t.Helper()
	namespace := inject.ShadowNamespace(podNamespace, false)
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace,
		Labels: map[string]string{inject.LabelShadowNamespaceFor: podNamespace}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	h := &heldCreates{podUIDs: map[string]bool{}}
	released, probed := make(chan struct{}), make(chan struct{}, 1)
	h.release = sync.OnceFunc(func() { close(released) })
	url, ca := harness.StartAdmissionServer(t, func(review *admissionv1.AdmissionReview) {
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if review.Request.Name == probeName {
			select {
			case probed <- struct{}{}:
			default:
			}
			return
		}
		select {
		case <-released:
			return // no longer holding
		default:
		}
		var d metav1.PartialObjectMetadata
		_ = json.Unmarshal(review.Request.Object.Raw, &d) // the API server sends what it stores
		h.mu.Lock()
		h.podUIDs[d.Labels[inject.LabelPodUID]] = true
		h.mu.Unlock()
		<-released
	})
	// Registered after the server's: cleanups run last first, so the held request is freed
	// before the server waits for it.
	t.Cleanup(h.release)
	cfg := harness.WebhookConfiguration("reliability-hold", url, ca, namespace, "apps", "deployments")
	if _, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing the holding webhook: %v", err)
		}
	})
	// The API server learns of the configuration from a watch, a moment after it is stored.
	probe := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: probeName, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": probeName}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": probeName}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	harness.Eventually(t, time.Minute, "the API server calls the holding webhook", func() (bool, string) {
		_, err := kube.AppsV1().Deployments(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		select {
		case <-probed:
			return true, ""
		default:
			return false, fmt.Sprintf("a dry-run create did not reach it (%v)", err)
		}
	})
	return h
}

// waitHeld returns once n creates are being held, within timeout.
func (h *heldCreates) waitHeld(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, fmt.Sprintf("%d shadow Deployment applies held", n), func() (bool, string) {
		got := len(h.heldPods())
		return got >= n, fmt.Sprint(got, " held")
	})
}
