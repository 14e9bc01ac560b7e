package reliability

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/inject"
)

// maxPeakRSS bounds serve's resident memory through the load: the memory limit of its
// container (manifests/base/deployment.yaml), above which the kernel kills it. Its caches
// hold shadow objects and the pods that may have one, so memory grows with the shadows in the
// cluster; a thousand measured about half of this.
const maxPeakRSS = 256 << 20

// Pods with ports created by concurrent clients through the API server are all admitted, each
// with its whole shadow; once they are all deleted the reconciler leaves no shadow object
// behind, and serve's memory stays under maxPeakRSS.
func TestConcurrentCreatesAreAllAdmittedWithShadowsAndLeaveNoOrphanOnceDeleted(t *testing.T) {
	ctx := harness.TestContext(t, 10*time.Minute)
	const namespace = "load"
	count, clients := harness.Scaled(150, 1000), harness.Scaled(15, 50)
	cluster.Kubectl.CreateNamespaces(ctx, t, namespace)
	pods := make([]*corev1.Pod, count)
	for i := range pods {
		pods[i] = bench.TypicalPod(fmt.Sprintf("load-%d", i), namespace, true, false)
	}
	_, wall, failed := bench.CreatePods(ctx, kube, pods, clients)
	for _, err := range failed[:min(len(failed), 5)] {
		t.Errorf("create failed: %v", err)
	}
	created := audit(ctx, t, namespace)
	if created.Pods != count-len(failed) || len(created.Incomplete) > 0 || len(created.Orphans) > 0 {
		t.Errorf("after %d creates with %d failed: %s", count, len(failed), created)
	}

	// Deleted at once: no kubelet holds pods that were never scheduled.
	if err := kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	var left harness.ShadowAudit
	collected := harness.Eventually(t, 5*time.Minute, "the reconciler deletes every shadow of the deleted pods", func() (bool, string) {
		left = audit(ctx, t, namespace)
		return left.Pods == 0 && left.Objects == 0, left.String()
	})
	peak, err := cluster.SG.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	if peak > maxPeakRSS {
		t.Errorf("serve's peak RSS is %d MiB, above the bound of %d MiB", peak>>20, maxPeakRSS>>20)
	}
	t.Logf("%d pods by %d clients in %s; shadows of all deleted pods gone %s after the delete; shadow namespace %s",
		count, clients, wall.Round(time.Millisecond), collected.Round(time.Millisecond), inject.ShadowNamespace(namespace, false))
	harness.Scenario("load", "pods", count, "clients", clients, "errors", len(failed), "admitted", created.Pods,
		"incomplete_shadows", len(created.Incomplete), "orphans_after_delete", left.Objects,
		"seconds", fmt.Sprintf("%.1f", wall.Seconds()), "peak_rss_mib", peak>>20, "rss_bound_mib", maxPeakRSS>>20)
}
