package reliability

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// A rolling restart of two replicas behind one Service, while clients create pods without
// pause: each replica in turn leaves the balancer, gets SIGTERM, finishes what it has in
// flight, starts again and comes back. Not one create fails, and every pod has its whole
// shadow.
func TestARollingRestartOfTwoReplicasFailsNoCreate(t *testing.T) {
	ctx := harness.TestContext(t, 15*time.Minute)
	const namespace = "rolling"
	cluster.Kubectl.CreateNamespaces(ctx, t, namespace)
	r := behindBalancer(ctx, t, namespace)
	clients, rounds := harness.Scaled(4, 8), harness.Scaled(1, 3)
	c := startCreates(ctx, t, namespace, clients)
	restarts := 0
	for range rounds {
		for _, s := range r.all {
			c.waitAdmitted(t, 2*clients)
			r.lb.Remove(s.Port)
			if err := s.Stop(); err != nil {
				t.Errorf("a replica did not stop cleanly on SIGTERM: %v", err)
			}
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
			r.lb.Add(s.Port)
			restarts++
		}
	}
	c.waitAdmitted(t, 2*clients)
	tried, admitted, failures := c.stop()
	for _, err := range failures {
		t.Errorf("create failed during the rolling restart: %v", err)
	}
	got := audit(ctx, t, namespace)
	if got.Pods != admitted || len(got.Incomplete) > 0 || len(got.Orphans) > 0 {
		t.Errorf("after %d admitted creates: %s", admitted, got)
	}
	harness.Scenario("rolling-restart", "replicas", len(r.all), "restarts", restarts, "clients", clients,
		"creates", tried, "failed", len(failures), "admitted", admitted, "stored", got.Pods,
		"incomplete_shadows", len(got.Incomplete), "orphans", len(got.Orphans))
}

// A replica is killed (SIGKILL) while it applies a pod's shadow and while still in the
// balancer, as in a crash, and leaves the balancer only when a few more creates have been
// tried, as an endpoint stays in a Service until its readiness probe fails; then it is
// restarted. The creates that fail, fail while the killed replica was in the balancer, with
// the API server's webhook call error ending in a connection error (one webhook timeout
// allowed), and the clients go on; every stored pod has its whole shadow; and once the grace
// period has passed (and, if the killed replica held the lease, the other has taken it over)
// the objects of the admissions cut off are collected: no orphan remains.
func TestAKilledReplicaFailsCreatesOnlyWithTheWebhookCallErrorAndLeavesNoOrphan(t *testing.T) {
	ctx := harness.TestContext(t, 15*time.Minute)
	const namespace = "crash"
	cluster.Kubectl.CreateNamespaces(ctx, t, namespace)
	r := behindBalancer(ctx, t, namespace)
	clients := harness.Scaled(4, 8)
	c := startCreates(ctx, t, namespace, clients)
	c.waitAdmitted(t, 2*clients)
	// Hold the shadow Deployments' applies, so that the kill finds admissions mid-apply.
	hold := holdDeploymentCreates(ctx, t, namespace)
	// Admissions held on the replica that is not killed go on once the kill is done. Should
	// the kill not come (a failure below), they are let go after holdBound anyway: held to
	// serve's own deadline (about 14.5 s of the webhook's 15), they would end in shadowgate's
	// denial, a failure this test does not explain.
	const holdBound = 10 * time.Second
	safety := time.AfterFunc(holdBound, hold.release)
	defer safety.Stop()
	// Each client has one create in flight: once every client's is held, a replica judging a
	// pod is one holding a shadow apply, and the kill cuts that admission off mid-apply.
	hold.waitHeld(t, clients, holdBound/2)
	killed := r.find(t, "a replica applying a shadow", judgingMetric)
	wasLeader := leaderMetric.MatchString(metricsOf(t, killed))
	killedAt := time.Now()
	killed.Kill()
	if !safety.Stop() {
		t.Fatalf("the kill came more than %s after the hold began: the held admissions were let go before it", holdBound)
	}
	hold.release()
	from, _ := c.counts()
	harness.Eventually(t, 2*time.Minute, "more creates tried with the killed replica in the balancer", func() (bool, string) {
		tried, _ := c.counts()
		return tried >= from+2*clients, fmt.Sprint(tried-from, " since")
	})
	r.lb.Remove(killed.Port)
	removedAt := time.Now()
	if err := killed.Restart(); err != nil {
		t.Fatal(err)
	}
	r.lb.Add(killed.Port)
	c.waitAdmitted(t, 2*clients)
	tried, admitted, failures := c.stop()
	unexplainedCount, timeouts := 0, 1
	for _, f := range failures {
		if why := unexplained(f, killedAt, removedAt, &timeouts); why != "" {
			unexplainedCount++
			t.Errorf("a create failed unexplained (%s; kill %s, out of the balancer %s): %v",
				why, killedAt.Format(time.StampMilli), removedAt.Format(time.StampMilli), f)
		}
	}
	var final harness.ShadowAudit
	took := harness.Eventually(t, 3*time.Minute+gracePeriod, "no orphan and no incomplete shadow", func() (bool, string) {
		final = audit(ctx, t, namespace)
		return len(final.Orphans) == 0 && len(final.Incomplete) == 0, final.String()
	})
	if final.Pods != admitted {
		t.Errorf("%d pods admitted but %d stored", admitted, final.Pods)
	}
	// The pods whose Deployment was held and that were never stored: admissions the kill cut off.
	stored, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cutOff := hold.heldPods()
	for _, p := range stored.Items {
		delete(cutOff, string(p.UID))
	}
	if len(cutOff) == 0 {
		t.Error("the kill cut no admission off mid-apply: every held pod was stored")
	}
	t.Logf("%d failures, e.g. %v; %d admissions cut off mid-apply; no orphan %s after the creates stopped",
		len(failures), failures[:min(1, len(failures))], len(cutOff), took.Round(time.Millisecond))
	harness.Scenario("replica-kill", "clients", clients, "killed_leader", wasLeader, "creates", tried, "failed", len(failures),
		"timeouts", 1-timeouts, "unexplained", unexplainedCount, "admitted", admitted, "stored", final.Pods, "cut_off_mid_apply", len(cutOff),
		"incomplete_shadows", len(final.Incomplete), "orphans_left", len(final.Orphans), "clean_after_s", int(took.Seconds()))
}

// metricsOf is a replica's metrics text.
func metricsOf(t *testing.T, s *harness.Shadowgate) string {
	t.Helper()
	m, err := s.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
