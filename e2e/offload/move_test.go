package offload

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// When Slurm reaches the job's node at another address, the shadow rebuilds its tunnel in
// place: the same shadow pod (same UID, same IP, no container restart) serves the notebook's
// page from the new address.
func TestTheShadowFollowsTheJobToANewAddressInPlace(t *testing.T) {
	const ns = "nb-move"
	hpc := site.local.HPC
	kubectl(t, "", "create", "namespace", ns)
	kubectl(t, notebook(t, ns, harness.HPCNode), "apply", "-f", "-")
	uid := kubectl(t, "", "get", "pod", "-n", ns, "notebook", "-o", "jsonpath={.metadata.uid}")
	s := shadowOf("notebook", ns, false)
	t.Cleanup(func() { deleteAndWaitGone(t, ns, "notebook", uid, s) })

	waitForJob(t, uid, "RUNNING", 2*time.Minute)
	name, shadowUID, ip := s.readyPod(t, 3*time.Minute)
	url, pageServed := notebookPage(ns, ip)
	waitFor(t, time.Minute, "the notebook's page at "+url, pageServed)
	restarts := func() string {
		return kubectl(t, "", "get", "pod", "-n", s.namespace, name, "-o", "jsonpath={.status.containerStatuses[*].restartCount}")
	}
	before := restarts()

	if err := hpc.MoveComputeNode(hpc.SecondComputeAddress); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hpc.MoveComputeNode(hpc.ComputeAddress); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, time.Minute, "the shadow to forward to "+hpc.SecondComputeAddress, func() error {
		logs, err := kubectlOutput("logs", "-n", s.namespace, name, "-c", "ssh-forward")
		if err != nil {
			return err
		}
		if !strings.Contains(logs, "to "+hpc.SecondComputeAddress+" ") {
			return fmt.Errorf("its log does not name the new address yet:\n%s", logs)
		}
		return nil
	})
	waitFor(t, time.Minute, "the notebook's page at "+url+" from the new address", pageServed)
	after, afterUID, afterIP := s.readyPod(t, time.Minute)
	if after != name || afterUID != shadowUID || afterIP != ip {
		t.Errorf("the shadow pod was replaced: before %s %s %s, after %s %s %s", name, shadowUID, ip, after, afterUID, afterIP)
	}
	// The pod's owner is told nothing went wrong: the one TunnelReady stands, no TunnelFailed.
	if evs := tunnelEventsOf(t, ns, "notebook", "TunnelFailed"); len(evs) != 0 {
		t.Errorf("following the job to its new address was reported as a failure: %+v", evs)
	}
	if evs := tunnelEventsOf(t, ns, "notebook", "TunnelReady"); len(evs) != 1 {
		t.Errorf("TunnelReady recorded %d times around the move, want once: %+v", len(evs), evs)
	}
	if now := restarts(); now != before {
		previous, _ := kubectlOutput("logs", "-n", s.namespace, name, "-c", "ssh-forward", "--previous")
		t.Errorf("the shadow's container restarted (restart counts %q before the move, %q after) rather than rebuilding in place; its previous log:\n%s",
			before, now, previous)
	}
}
