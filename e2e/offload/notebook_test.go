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
	for _, c := range []struct{ mode, node, namespace string }{
		{"portforward", harness.HPCNode, "nb-forward"},
		{"exec", harness.NoForwardNode, "nb-exec"},
		{"node from the ConfigMap", harness.PublishingNode, "nb-configmap"},
		{"Kerberos", harness.KerberosNode, "nb-kerberos"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			kubectl(t, "", "create", "namespace", c.namespace)
			kubectl(t, notebook(t, c.namespace, c.node), "apply", "-f", "-")
			uid := kubectl(t, "", "get", "pod", "-n", c.namespace, "notebook", "-o", "jsonpath={.metadata.uid}")
			s := shadowOf("notebook", c.namespace, true)
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
			deleted = true
			deleteAndWaitGone(t, c.namespace, "notebook", uid, s)
		})
	}
}
