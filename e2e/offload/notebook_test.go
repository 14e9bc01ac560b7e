package offload

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// The guide's notebook, admitted on any virtual node, runs as a Slurm job, its shadow becomes
// Ready on the cluster node, and the notebook's page comes back through the shadow's pod IP
// and port: with ssh -L through the login node that forwards, with exec relays through the
// one that refuses forwarding, with the compute node read from the ConfigMap the virtual node
// publishes it in, and logged in with a Kerberos ticket of the site's realm (a real KDC). Deleting the pod cancels the job and the shadow is removed.
func TestTheGuidesNotebookServesItsPageThroughTheShadow(t *testing.T) {
	for _, c := range []struct{ mode, node, namespace, forwardMode string }{
		{"portforward", harness.HPCNode, "nb-forward", "portforward"},
		{"exec", harness.NoForwardNode, "nb-exec", "exec"},
		{"node from the ConfigMap", harness.PublishingNode, "nb-configmap", "portforward"},
		{"Kerberos", harness.KerberosNode, "nb-kerberos", "portforward"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			kubectl(t, "", "create", "namespace", c.namespace)
			user := scientist(t, c.namespace)
			kubectl(t, notebook(t, c.namespace, c.node), "apply", "-f", "-")
			uid := kubectl(t, "", "get", "pod", "-n", c.namespace, "notebook", "-o", "jsonpath={.metadata.uid}")
			s := shadowOf("notebook", c.namespace, false)
			deleted := false
			t.Cleanup(func() {
				if !deleted {
					deleteAndWaitGone(t, c.namespace, "notebook", uid, s)
				}
			})

			waitForJob(t, uid, "RUNNING", 2*time.Minute)
			_, _, ip := s.readyPod(t, 3*time.Minute)
			url := fmt.Sprintf("http://%s:8888/", ip)
			waitFor(t, time.Minute, "the notebook's page at "+url, func() error {
				body, err := get(url)
				if err != nil {
					return err
				}
				if !strings.Contains(body, "stand-in notebook for pod "+c.namespace+"/notebook") {
					return fmt.Errorf("the page is not the notebook's: %q", body)
				}
				return nil
			})
			// The pod says once that its tunnel is ready and how to reach it, and never that
			// it failed; shadowgate status shows it Ready, leading to the job's node.
			ready := waitForTunnelEvent(t, time.Minute, c.namespace, "notebook", "TunnelReady", s.name+"."+s.namespace+".svc port 8888", "("+c.forwardMode+")")
			row := wantStatus(t, user, c.namespace, "Ready", "Ready")
			if row.Tunnel.ComputeNode != site.local.HPC.ComputeAddress || row.Tunnel.ForwardMode != c.forwardMode {
				t.Errorf("shadowgate status shows compute node %q, mode %q; want %q, %q", row.Tunnel.ComputeNode, row.Tunnel.ForwardMode, site.local.HPC.ComputeAddress, c.forwardMode)
			}
			if evs := tunnelEventsOf(t, c.namespace, "notebook", "TunnelReady"); len(evs) != 1 || evs[0].Count > 1 {
				t.Errorf("TunnelReady recorded %d times (%+v), want once: %+v", len(evs), evs, ready)
			}
			if evs := tunnelEventsOf(t, c.namespace, "notebook", "TunnelFailed"); len(evs) != 0 {
				t.Errorf("the happy path reported TunnelFailed: %+v", evs)
			}
			deleted = true
			deleteAndWaitGone(t, c.namespace, "notebook", uid, s)
		})
	}
}
