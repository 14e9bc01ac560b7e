package offload

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// otherPort is where the second server of the follow test listens, beside the notebook's 8888
// on the cluster's shared host network.
const otherPort = 18890

// rollBound is how soon a policy change has replaced a shadow pod and its tunnel is Ready again:
// the policy reaches serve at once, the roll starts on the next reconcile, and the new shadow
// pod logs in and checks its forwards, as a first one does.
const rollBound = 2 * time.Minute

// A running notebook's shadow follows what the admin changes, and the notebook's pod and job
// are never touched: new known-hosts content reaches the shadow without a restart; new
// ExtraOptions and Image roll the shadows of the notebook and of a second server beside it,
// one after the other (serve runs with harness.SiteMaxRollingShadows), each with one
// ShadowRolled Event and a new shadow pod with both, and both serve through them again, while a
// third pod's job never leaves the queue: its shadow, never Ready, rolls and gives up the slot
// once its new pod runs; a policy that would now refuse the pod leaves pod and shadow as they
// are and says so on the pod, in `shadowgate status` as the pod's owner.
func TestAShadowFollowsThePolicyWithoutTouchingItsPod(t *testing.T) {
	const ns = "follow-policy"
	t.Cleanup(func() {
		kubectl(t, harness.PolicyConfigMap(site.local.Policy), "apply", "--server-side", "--force-conflicts", "--field-manager=e2e-install", "-f", "-")
	})
	uid, s, user := startOffloaded(t, ns, offloadedPod(ns, harness.HPCNode, nil))
	shadowPod, _, ip := s.readyPod(t, 3*time.Minute)
	waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelReady", "notebook-"+ns)
	url, page := notebookPage(ns, ip)
	waitFor(t, time.Minute, "the notebook's page at "+url, page)
	// A second server beside it, so the roll shows its pace: harness.SiteMaxRollingShadows at
	// a time.
	kubectl(t, offloadedPodNamed(ns, "other", harness.HPCNode, otherPort, nil,
		"python3", "-m", "http.server", "--bind", "0.0.0.0", strconv.Itoa(otherPort)), "apply", "-f", "-")
	otherUID := kubectl(t, "", "get", "pod", "-n", ns, "other", "-o", "jsonpath={.metadata.uid}")
	other := shadowOf("other", ns, false)
	t.Cleanup(func() { deleteAndWaitGone(t, ns, "other", otherUID, other) })
	otherShadowPod, _, otherIP := other.readyPod(t, 3*time.Minute)
	otherPage := listingPage(otherIP)
	waitFor(t, time.Minute, "the second server's listing", otherPage)
	jobBefore, nodeBefore, err := jobState(uid)
	if err != nil || jobBefore != "RUNNING" {
		t.Fatalf("the notebook's job: %s %v", jobBefore, err)
	}
	generation := func() string {
		return kubectl(t, "", "get", "deployment", s.name, "-n", s.namespace, "-o", "jsonpath={.metadata.generation}")
	}
	generationBefore := generation()
	// A pod whose job never starts: its shadow waits for the compute node, never Ready. It rolls
	// first (its tunnel carries nothing) and must not hold the one slot for its queue.
	kubectl(t, offloadedPodNamed(ns, "queued", harness.HPCNode, otherPort+1, map[string]string{"slurm-job.vk.io/flags": harness.PendingJobFlags},
		"sleep", "infinity"), "apply", "-f", "-")
	queuedUID := kubectl(t, "", "get", "pod", "-n", ns, "queued", "-o", "jsonpath={.metadata.uid}")
	queued := shadowOf("queued", ns, false)
	t.Cleanup(func() { deleteAndWaitGone(t, ns, "queued", queuedUID, queued) })
	waitForTunnelEvent(t, failureBound, ns, "queued", "TunnelWaitingForNode", "")

	// Known hosts content: the copy follows, the mounted file changes, nothing restarts.
	knownHosts := kubectl(t, "", "get", "configmap", harness.SiteKnownHostsMap, "-n", "shadowgate-system", "-o", "jsonpath={.data.known_hosts}")
	t.Cleanup(func() { setKnownHosts(t, knownHosts) })
	setKnownHosts(t, knownHosts+"# follow-policy: a comment the login's host keys do not need\n")
	waitFor(t, copyBound, "the shadow's copy of the known hosts to follow", func() error {
		got, err := kubectlOutput("get", "configmap", harness.SiteKnownHostsMap, "-n", s.namespace, "-o", "jsonpath={.data.known_hosts}")
		if err == nil && !strings.Contains(got, "# follow-policy") {
			err = fmt.Errorf("the copy in %s holds the old content", s.namespace)
		}
		return err
	})
	time.Sleep(nodeRefresh)
	if again, _, _ := s.readyPod(t, time.Minute); again != shadowPod || generation() != generationBefore {
		t.Errorf("new known-hosts content restarted the shadow (pod %s, then %s; generation %s, then %s)", shadowPod, again, generationBefore, generation())
	}
	if evs := tunnelEventsOf(t, ns, "notebook", "ShadowRolled"); len(evs) != 0 {
		t.Errorf("ShadowRolled for new known-hosts content: %+v", evs)
	}

	// ExtraOptions and Image: the shadow rolls, once, and carries the page again.
	const image = policy.DefaultImage + "-follow"
	hpcBlock := "  " + harness.HPCNode + ":\n    Network:\n      EnableTunnel: true\n      ShadowMode: ssh\n      SSH:\n"
	if !strings.Contains(site.local.Policy, hpcBlock) {
		t.Fatalf("the site's policy has no block %q", hpcBlock)
	}
	changed := strings.Replace(site.local.Policy, hpcBlock, hpcBlock+"        Image: "+image+"\n        ExtraOptions: [ServerAliveInterval=7]\n", 1)
	kubectl(t, harness.PolicyConfigMap(changed), "apply", "--server-side", "--force-conflicts", "--field-manager=e2e-install", "-f", "-")
	seen := watchDrift(t, ns, 3*rollBound, func() bool {
		return len(tunnelEventsOf(t, ns, "notebook", "ShadowRolled")) > 0 && len(tunnelEventsOf(t, ns, "other", "ShadowRolled")) > 0 &&
			len(tunnelEventsOf(t, ns, "queued", "ShadowRolled")) > 0
	})
	if seen.mostRolling > harness.SiteMaxRollingShadows || !seen.outOfDate {
		t.Errorf("the two shadows rolled %d at a time (at most %d), one waiting OutOfDate: %t; want one after the other",
			seen.mostRolling, harness.SiteMaxRollingShadows, seen.outOfDate)
	}
	waitForTunnelEvent(t, rollBound, ns, "notebook", "ShadowRolled", s.namespace+"/"+s.name)
	var rolled string
	waitFor(t, rollBound, "a new Ready shadow pod", func() error {
		rolled, _, ip = s.readyPod(t, rollBound)
		if rolled == shadowPod {
			return fmt.Errorf("shadow pod %s is the one from before the change", rolled)
		}
		return nil
	})
	spec := kubectl(t, "", "get", "pod", rolled, "-n", s.namespace, "-o", "jsonpath={.spec.containers[*].image} {.spec.containers[*].env}")
	if !strings.Contains(spec, image) || !strings.Contains(spec, "ServerAliveInterval=7") {
		t.Errorf("the new shadow pod does not run the policy's image and ExtraOptions: %s", spec)
	}
	url, page = notebookPage(ns, ip)
	waitFor(t, rollBound, "the notebook's page through the new shadow pod at "+url, page)
	waitFor(t, rollBound, "a new Ready shadow pod of the second server", func() error {
		again, _, againIP := other.readyPod(t, rollBound)
		if again == otherShadowPod {
			return fmt.Errorf("shadow pod %s is the one from before the change", again)
		}
		otherPage = listingPage(againIP)
		return nil
	})
	waitFor(t, rollBound, "the second server's listing through its new shadow pod", otherPage)
	harness.Eventually(t, 30*time.Second, "shadowgate status to show the shadow Current and the tunnel Ready", func() (bool, string) {
		row := tunnelStatus(t, user, ns, "notebook")
		return row.Shadow.State == "Current" && row.Tunnel != nil && row.Tunnel.State == "Ready", fmt.Sprintf("%+v %+v", row.Shadow, row.Tunnel)
	}, func() string { return shadowPodsAndReporterLog(ns) }, siteLogs)
	if evs := tunnelEventsOf(t, ns, "notebook", "ShadowRolled"); len(evs) != 1 {
		t.Errorf("%d ShadowRolled Events, want 1: %+v", len(evs), evs)
	}
	wantUntouched(t, ns, uid, jobBefore, nodeBefore)
	if state, _, err := jobState(otherUID); err != nil || state != "RUNNING" {
		t.Errorf("the second server's job is %s (%v) after the roll, want RUNNING", state, err)
	}

	// Tightened: the policy in force would refuse the pod. Pod and shadow stay; the pod says so.
	tightened := strings.Replace(changed, "  "+harness.HPCNode+":\n", "  "+harness.HPCNode+":\n    AllowedNamespaces: [physics]\n", 1)
	kubectl(t, harness.PolicyConfigMap(tightened), "apply", "--server-side", "--force-conflicts", "--field-manager=e2e-install", "-f", "-")
	ev := waitForTunnelEvent(t, rollBound, ns, "notebook", "ShadowRefusedByPolicy", "AllowedNamespaces")
	harness.Eventually(t, 30*time.Second, "shadowgate status to show the shadow Refused", func() (bool, string) {
		row := tunnelStatus(t, user, ns, "notebook")
		return row.Shadow.State == "Refused" && strings.Contains(row.Shadow.Reason, "AllowedNamespaces"), fmt.Sprintf("%+v", row.Shadow)
	}, func() string { return ev.Message })
	table, _ := shadowgateStatus(t, user, "-n", ns, "notebook")
	if !strings.Contains(table, "Refused") || !strings.Contains(table, "left as they are") {
		t.Errorf("shadowgate status does not say the shadow is left as it is:\n%s", table)
	}
	time.Sleep(5 * time.Second)
	if again, _, _ := s.readyPod(t, time.Minute); again != rolled {
		t.Errorf("a policy refusing the pod replaced its shadow pod (%s, then %s)", rolled, again)
	}
	if err := page(); err != nil {
		t.Errorf("a policy refusing the pod stopped its tunnel: %v", err)
	}
	wantUntouched(t, ns, uid, jobBefore, nodeBefore)
}

// setKnownHosts writes content as the site's known hosts source.
func setKnownHosts(t *testing.T, content string) {
	t.Helper()
	kubectl(t, fmt.Sprintf(`{"data":{"known_hosts":%q}}`, content), "patch", "configmap", harness.SiteKnownHostsMap, "-n", "shadowgate-system", "--type=merge", "--patch-file=/dev/stdin")
}

// wantUntouched checks that the offloaded pod is the one created, not restarted, and its job
// the same, running where it ran.
func wantUntouched(t *testing.T, ns, uid, job, node string) {
	t.Helper()
	got := kubectl(t, "", "get", "pod", "notebook", "-n", ns, "-o", "jsonpath={.metadata.uid} {.status.phase}")
	if got != uid+" Running" {
		t.Errorf("the offloaded pod is %q, want %s Running", got, uid)
	}
	state, at, err := jobState(uid)
	if err != nil || state != job || at != node {
		t.Errorf("the notebook's job is %s on %s (%v), want %s on %s as before", state, at, err, job, node)
	}
}

// listingPage checks that python3's http.server answers through the shadow pod at ip.
func listingPage(ip string) func() error {
	url := fmt.Sprintf("http://%s:%d/", ip, otherPort)
	return func() error {
		body, err := get(url)
		if err == nil && !strings.Contains(body, "Directory listing for /") {
			err = fmt.Errorf("%s is no directory listing: %q", url, body)
		}
		return err
	}
}

// driftSeen is what watchDrift saw of a namespace's pods during a roll.
type driftSeen struct {
	mostRolling int  // the most pods whose shadow was Rolling at once
	outOfDate   bool // a pod's shadow waited OutOfDate
}

// watchDrift reads the shadow's state in ns's Tunnels every quarter second until done says
// so, or timeout.
func watchDrift(t *testing.T, ns string, timeout time.Duration, done func() bool) driftSeen {
	t.Helper()
	var seen driftSeen
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		out, err := kubectlOutput("get", "tunnels", "-n", ns, "-o", `jsonpath={range .items[*]}{.status.shadow.state}{"\n"}{end}`)
		if err != nil {
			continue
		}
		states := strings.Fields(out)
		seen.mostRolling = max(seen.mostRolling, len(slices.DeleteFunc(slices.Clone(states), func(s string) bool { return s != "Rolling" })))
		seen.outOfDate = seen.outOfDate || slices.Contains(states, "OutOfDate")
		if done() {
			return seen
		}
	}
	t.Fatalf("the roll of %s's shadows did not end within %s: %+v", ns, timeout, seen)
	return seen
}
