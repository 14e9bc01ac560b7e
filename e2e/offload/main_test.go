// Package offload tests what happens after admission, on the whole local site
// (harness.RunSiteSuite): offloaded pods become batch jobs of a real Slurm through a virtual
// node, the shadows shadowgate applies are run by the cluster's node, and traffic reaches the
// job through them, and the job reaches cluster Services through the reverse tunnel. Every
// check goes through kubectl, ssh or an HTTP client, as a user's would.
//
// The stand-ins, because this machine can run neither: no container images (each container
// runs this machine's own tools, and a job's notebook image is a small HTTP server), and the
// cluster's pods share the host's network, as hostNetwork pods do, so two shadows of the same
// port cannot run at once: the tests that start one run one after another.
package offload

import (
	"os"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// gracePeriod is serve's --shadow-grace-period: short, so a deleted pod's shadow, and the
// port it holds on the cluster node, goes soon after the pod.
const gracePeriod = 5 * time.Second

var site struct {
	root    string
	dir     string // the suite's state and logs
	bin     string // the shadowgate binary, for shadowgate status
	sg      *harness.Shadowgate
	cp      *harness.ControlPlane
	kubectl harness.Kubectl
	local   *harness.LocalSite
}

func TestMain(m *testing.M) {
	os.Exit(harness.RunSiteSuite(m, "offload", "../..", gracePeriod, func(s *harness.Suite) error {
		site.root, site.dir, site.bin, site.sg, site.cp, site.kubectl, site.local = s.Root, s.Dir, s.Bin, s.SG, s.CP, s.Kubectl, s.Site
		return nil
	}))
}
