// Package e2e tests shadowgate against a real kube-apiserver and etcd, driven by a real
// kubectl: TestMain builds them (hack/e2e-tools.sh, cached in bin/), starts them on loopback,
// installs shadowgate from manifests/overlays/dev and runs `shadowgate serve` as its
// ServiceAccount. Tests share that cluster and each works in namespaces of its own.
package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// gracePeriod is serve's --shadow-grace-period here: long enough to tell "at once" from
// "after the grace period" on two loaded cores, where a reconcile can lag by seconds; the
// reconciler tests derive their windows from it.
const gracePeriod = 30 * time.Second

// cluster is the control plane and shadowgate every test uses, set up once by TestMain.
var cluster struct {
	root    string
	bin     string // the shadowgate binary being served, also run as `shadowgate check`
	cp      *harness.ControlPlane
	sg      *harness.Shadowgate
	kubectl harness.Kubectl
}

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e", "..", gracePeriod, func(s *harness.Suite) error {
		cluster.root, cluster.bin, cluster.cp, cluster.sg, cluster.kubectl = s.Root, s.Bin, s.CP, s.SG, s.Kubectl
		return nil
	}))
}
