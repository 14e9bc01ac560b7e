// Package reliability puts shadowgate under faults and load on a real control plane and
// reports each scenario in one RELIABILITY line (harness.Scenario): the API server stopping
// during a shadow apply, a rolling restart and a crash of replicas behind a load balancer,
// and a burst of concurrent creates. Bounded under `make test`, full under
// `make reliability` (SHADOWGATE_RELIABILITY=full). A package of its own: its tests stop the
// API server and restart serve, which the e2e package's tests must not see.
package reliability

import (
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// gracePeriod is serve's --shadow-grace-period: short, since the scenarios wait for it to
// see partial shadows collected, and long enough that a shadow applied a moment before its
// pod is stored is never mistaken for an orphan on two loaded cores.
const gracePeriod = 10 * time.Second

// cluster is the control plane and serve every test uses, set up once by TestMain; kube is
// a client of the cluster admin's without client-side rate limit, so the load is the test's.
var (
	cluster *harness.Suite
	kube    kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/reliability", "../..", gracePeriod, func(s *harness.Suite) error {
		cfg := rest.CopyConfig(s.CP.Admin)
		cfg.QPS = -1
		var err error
		cluster = s
		kube, err = kubernetes.NewForConfig(cfg)
		return err
	}))
}
