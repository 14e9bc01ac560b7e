package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/webhook"
)

// replicas are two serve replicas behind one Balancer, as behind a Service with two
// endpoints: TestMain's serve and a second one reading the same certificate directory, as
// replicas mount the same Secret.
type replicas struct {
	lb  *harness.Balancer
	all []*harness.Shadowgate
}

// behindBalancer starts the second replica and the balancer, points shadowgate's webhook
// configurations at the balancer and returns once the API server calls through it. When the
// test ends it points them back at TestMain's serve (restarted if the test left it stopped),
// then closes the balancer and stops the second replica: each has a cleanup of its own,
// registered as soon as it exists, so a failure on the way leaks neither.
func behindBalancer(ctx context.Context, t *testing.T, namespace string) *replicas {
	t.Helper()
	dir := filepath.Join(cluster.Dir, t.Name()) // its log, kept with the suite's when a test fails
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	second, err := harness.Serve(cluster.Kubectl, cluster.CP, harness.ServeOptions{
		Bin: cluster.Bin, Dir: dir, CertDir: cluster.SG.CertDir, GracePeriod: gracePeriod})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := second.Stop(); err != nil {
			t.Errorf("the second replica did not stop cleanly: %v", err)
		}
	})
	// The second replica alone at first: its counters then show when the API server calls
	// through the balancer, for both webhook configurations, and not serve's own port.
	lb, err := harness.StartBalancer(second.Port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lb.Close(); err != nil {
			t.Errorf("closing the balancer: %v", err)
		}
	})
	r := &replicas{lb: lb, all: []*harness.Shadowgate{cluster.SG, second}}
	// Registered last, so it runs first: the webhooks leave the balancer before it closes.
	t.Cleanup(func() { r.restore(t) })
	if err := cluster.SG.InstallWebhooksAt(ctx, lb.Port); err != nil {
		t.Fatal(err)
	}
	probe := bench.TypicalPod("probe", namespace, true, false)
	harness.Eventually(t, time.Minute, "the API server calls both webhooks through the balancer", func() (bool, string) {
		_, err := kube.CoreV1().Pods(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		metrics, merr := second.Metrics()
		return strings.Contains(metrics, decisions(webhook.PathMutatePods)) && strings.Contains(metrics, decisions(webhook.PathValidatePods)),
			fmt.Sprintf("the second replica has not judged a pod on both endpoints (dry run: %v, metrics: %v)", err, merr)
	})
	lb.Add(cluster.SG.Port)
	return r
}

// decisions begins the metric line of shadowgate's decisions on endpoint.
func decisions(endpoint string) string {
	return `shadowgate_admission_decisions_total{endpoint="` + endpoint + `"`
}

// restore points the webhooks back at TestMain's serve, restarted if it is not running, and
// returns once the API server calls it directly, so later tests find the suite as it was.
func (r *replicas) restore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	restartServeIfExited(t)
	if err := cluster.SG.InstallWebhooks(ctx); err != nil {
		t.Errorf("pointing the webhooks back at TestMain's serve: %v", err)
	}
	// With no backend left in the balancer, a call through it fails: a create that is
	// admitted went to serve's own port.
	for _, s := range r.all {
		r.lb.Remove(s.Port)
	}
	probe := bench.TypicalPod("probe", "default", true, false)
	harness.Eventually(t, time.Minute, "the API server calls TestMain's serve directly", func() (bool, string) {
		_, err := kube.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, fmt.Sprint(err)
	})
}

// Metric lines of a replica that holds shadowgate's lease, and of one judging a pod.
var (
	leaderMetric  = regexp.MustCompile(`(?m)^leader_election_master_status\{name="shadowgate.interlink.eu"\} 1$`)
	judgingMetric = regexp.MustCompile(`(?m)^controller_runtime_webhook_requests_in_flight\{webhook="` + webhook.PathValidatePods + `"\} [1-9]`)
)

// find returns the first replica whose metrics match, waiting until one does.
func (r *replicas) find(t *testing.T, what string, metric *regexp.Regexp) *harness.Shadowgate {
	t.Helper()
	var found *harness.Shadowgate
	harness.Eventually(t, time.Minute, what, func() (bool, string) {
		for _, s := range r.all {
			if m, err := s.Metrics(); err == nil && metric.MatchString(m) {
				found = s
				return true, ""
			}
		}
		return false, "no replica's metrics match " + metric.String()
	})
	return found
}

// creates are pods created without pause by several clients until stopped. A client whose
// create failed backs off a moment and creates the next pod: a retry under a new name, as a
// ReplicaSet's generateName makes one, so the failed pod's partial shadow stays an orphan and
// does not become the retried pod's.
type creates struct {
	done     chan struct{}
	finished sync.WaitGroup

	mu       sync.Mutex
	tried    int
	admitted int
	failures []failure
}

// failure is a create that failed, with when it was sent and when it came back.
type failure struct {
	sent, failed time.Time
	err          error
}

func (f failure) String() string {
	return fmt.Sprintf("sent %s, failed %s: %v", f.sent.Format(time.StampMilli), f.failed.Format(time.StampMilli), f.err)
}

func startCreates(ctx context.Context, t *testing.T, namespace string, clients int) *creates {
	c := &creates{done: make(chan struct{})}
	for client := range clients {
		c.finished.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-c.done:
					return
				default:
				}
				sent := time.Now()
				_, err := kube.CoreV1().Pods(namespace).Create(ctx, bench.TypicalPod(fmt.Sprintf("c%d-%d", client, i), namespace, true, false), metav1.CreateOptions{})
				c.record(sent, err)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	t.Cleanup(func() { c.stop() })
	return c
}

func (c *creates) record(sent time.Time, err error) {
	failed := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tried++
	if err == nil {
		c.admitted++
	} else {
		c.failures = append(c.failures, failure{sent: sent, failed: failed, err: err})
	}
}

// counts are what the clients did so far.
func (c *creates) counts() (tried, admitted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tried, c.admitted
}

// waitAdmitted waits until n more pods are admitted: the creates go on through whatever was
// just done to the replicas.
func (c *creates) waitAdmitted(t *testing.T, n int) {
	t.Helper()
	_, from := c.counts()
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("%d more pods admitted", n), func() (bool, string) {
		_, admitted := c.counts()
		return admitted >= from+n, fmt.Sprint(admitted-from, " since")
	})
}

// stop ends the creates, once, and returns what they did and what failed.
func (c *creates) stop() (tried, admitted int, failures []failure) {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	c.finished.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tried, c.admitted, c.failures
}
