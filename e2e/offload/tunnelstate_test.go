package offload

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// failureBound is how long each failure below may take to show on the pod as a TunnelFailed
// Event: the failing check or exit (the forward checks every 10s), the probe (every 10s),
// the kubelet's Event, the reporter (at once on a pod change, every 10s otherwise) and, for
// a failed check, the 45s startup grace a job's server is given to come up.
const failureBound = 2 * time.Minute

// offloadedPod is pod notebook on node in ns forwarding port 8888, its shadow in <ns>-shadow
// unless the annotations say shadow-same-ns, with the annotations and command given (none:
// the stand-in notebook).
func offloadedPod(ns, node string, annotations map[string]string, command ...string) string {
	return offloadedPodNamed(ns, "notebook", node, 8888, annotations, command...)
}

// offloadedPodNamed is offloadedPod with another name and port.
func offloadedPodNamed(ns, name, node string, port int, annotations map[string]string, command ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  annotations:\n", name, ns)
	for k, v := range annotations {
		fmt.Fprintf(&b, "    %s: %q\n", k, v)
	}
	fmt.Fprintf(&b, `spec:
  nodeSelector:
    kubernetes.io/hostname: %s
  tolerations:
  - key: virtual-node.interlink/no-schedule
    operator: Exists
    effect: NoSchedule
  containers:
  - name: jupyter
    image: docker://jupyter/scipy-notebook
    ports:
    - containerPort: %d
      name: notebook
`, node, port)
	if len(command) > 0 {
		fmt.Fprintf(&b, "    command: [%q", command[0])
		for _, c := range command[1:] {
			fmt.Fprintf(&b, ", %q", c)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// startOffloaded creates ns and the pod, and deletes both when the test ends; it returns the
// pod's UID, its shadow and a kubeconfig of the namespace's scientist.
func startOffloaded(t *testing.T, ns, manifest string) (uid string, s shadow, user string) {
	t.Helper()
	kubectl(t, "", "create", "namespace", ns)
	user = scientist(t, ns)
	kubectl(t, manifest, "apply", "-f", "-")
	uid = kubectl(t, "", "get", "pod", "-n", ns, "notebook", "-o", "jsonpath={.metadata.uid}")
	s = shadowOf("notebook", ns, false)
	t.Cleanup(func() { deleteAndWaitGone(t, ns, "notebook", uid, s) })
	return uid, s, user
}

// wantStatus checks that shadowgate status, as the scientist, shows the pod's tunnel in state
// with reason, and prints it in its table too.
func wantStatus(t *testing.T, user, ns, state, reason string) statusRow {
	t.Helper()
	var row statusRow
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("shadowgate status to show %s/notebook %s %s", ns, state, reason), func() (bool, string) {
		row = tunnelStatus(t, user, ns, "notebook")
		if row.Tunnel == nil || row.Tunnel.State != state || row.Tunnel.Reason != reason {
			return false, fmt.Sprintf("it shows %+v", row.Tunnel)
		}
		return true, ""
	}, func() string { return shadowPodsAndReporterLog(ns) }, siteLogs)
	table, _ := shadowgateStatus(t, user, "-n", ns)
	if !strings.Contains(table, "notebook") || !strings.Contains(table, state) || !strings.Contains(table, reason) {
		t.Errorf("shadowgate status -n %s does not show the pod %s %s:\n%s", ns, state, reason, table)
	}
	return row
}

// Each runtime failure of the user guide's troubleshooting list, made for real on the site,
// shows on the offloaded pod itself as a TunnelFailed Event naming the reason and what to do,
// within failureBound, and shadowgate status, run with only the namespace's read rights,
// prints it.
func TestTunnelFailuresShowOnTheOffloadedPod(t *testing.T) {
	for name, c := range map[string]struct {
		node        string
		annotations map[string]string
		command     []string
		reason      string
		say         []string // parts of the Event's message: the reason's detail and its remedy
	}{
		"A login node that refuses forwarding, in portforward mode, is ForwardingProhibited with the exec remedy.": {
			node: harness.NoForwardPortforwardNode, reason: "ForwardingProhibited",
			say: []string{"ForwardingProhibited", "ForwardMode: exec", harness.NoForwardPortforwardNode},
		},
		"A known-hosts ConfigMap with another key for the login node is HostKeyMismatch naming the ConfigMap.": {
			node: harness.WrongHostKeyNode, reason: "HostKeyMismatch",
			say: []string{"HostKeyMismatch", harness.WrongKnownHostsMap},
		},
		"A key the login node does not accept is LoginRefused naming the Secret and the user.": {
			node: harness.WrongKeyNode, reason: "LoginRefused",
			say: []string{"LoginRefused", harness.WrongKeySecret, harness.SiteAccount},
		},
		"A job whose server listens on 127.0.0.1 only is NodeConnectionRefused, telling to bind 0.0.0.0.": {
			node: harness.HPCNode, command: []string{"python3", "-m", "http.server", "--bind", "127.0.0.1", "8888"}, reason: "NodeConnectionRefused",
			say: []string{"NodeConnectionRefused", "8888", "0.0.0.0"},
		},
		"A job queued past NodeWaitTimeout is NodeWaitTimedOut.": {
			node: harness.ShortWaitNode, annotations: map[string]string{"slurm-job.vk.io/flags": harness.PendingJobFlags}, reason: "NodeWaitTimedOut",
			say: []string{"NodeWaitTimedOut", "squeue"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			ns := "tf-" + strings.ToLower(c.reason)
			_, _, user := startOffloaded(t, ns, offloadedPod(ns, c.node, c.annotations, c.command...))
			waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelFailed", c.say...)
			row := wantStatus(t, user, ns, "Failed", c.reason)
			if !strings.Contains(row.LastEvent, "TunnelFailed") {
				t.Errorf("shadowgate status of the pod names last event %q, want the TunnelFailed one", row.LastEvent)
			}
			metrics, err := site.sg.Metrics()
			if err != nil {
				t.Fatal(err)
			}
			series := `shadowgate_tunnels{node="` + c.node + `",reason="` + c.reason + `",state="Failed"}`
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` [1-9]`).MatchString(metrics) {
				t.Errorf("the shadowgate_tunnels gauge counts no Failed tunnel as %s:\n%s", series, harness.GrepLines(metrics, "shadowgate_tunnels"))
			}
			if n := len(tunnelEventsOf(t, ns, "notebook", "TunnelReady")); n != 0 {
				t.Errorf("a failing tunnel was reported TunnelReady %d times", n)
			}
		})
	}
}

// A job that ends under its running pod (cancelled in Slurm) fails the pod, and its tunnel
// is reported as ended with NoRunningJob.
func TestAJobCancelledUnderItsPodIsNoRunningJob(t *testing.T) {
	const ns = "tf-ended"
	uid, s, user := startOffloaded(t, ns, offloadedPod(ns, harness.HPCNode, nil))
	waitForJob(t, uid, "RUNNING", 2*time.Minute)
	s.readyPod(t, 3*time.Minute)
	waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelReady", "notebook-"+ns)
	if out, err := site.local.HPC.Slurm("scancel", "--name="+uid).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v %s", err, out)
	}
	waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelFailed", "NoRunningJob", "phase Failed")
	wantStatus(t, user, ns, "Failed", "NoRunningJob")
}

// stoppableServer is a job's server that serves until it is asked for /stop (through the
// tunnel), then exits 0: a job that completes when the test says.
const stoppableServer = `import http.server, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"stopping" if self.path == "/stop" else b"serving")
        if self.path == "/stop":
            threading.Thread(target=server.shutdown).start()
server = http.server.ThreadingHTTPServer(("0.0.0.0", 8888), H)
server.serve_forever()`

// A job that completes is no failure, and the pod keeps what its tunnel came to: with the
// virtual node writing back its creation-time copy of the pod every 5 s, as interLink's VK
// does (an annotation the cluster admin puts on the pod is gone within seconds), the Tunnel
// stays Ready; when the job's server exits 0, the pod is told TunnelEnded and never
// TunnelFailed, while Slurm says COMPLETED and, half a minute on, the pod Succeeds; once
// finished, the scientist still reads Ended in shadowgate status. shadowgate never writes the
// pod: no field manager of its own is among the pod's.
func TestAJobThatCompletesEndsItsTunnelWithoutAWarning(t *testing.T) {
	const ns = "tf-completed"
	uid, s, user := startOffloaded(t, ns, offloadedPod(ns, harness.HPCNode, nil, "python3", "-c", stoppableServer))
	waitForJob(t, uid, "RUNNING", 2*time.Minute)
	_, _, ip := s.readyPod(t, 3*time.Minute)
	waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelReady", "notebook-"+ns)

	kubectl(t, "", "annotate", "pod", "notebook", "-n", ns, "example.org/written-after-creation=yes")
	waitFor(t, time.Minute, "the virtual node to write back the pod as it stored it, without the annotation", func() error {
		if v := kubectl(t, "", "get", "pod", "notebook", "-n", ns, "-o", `jsonpath={.metadata.annotations.example\.org/written-after-creation}`); v != "" {
			return fmt.Errorf("the annotation is still there: %q", v)
		}
		return nil
	})
	wantStatus(t, user, ns, "Ready", "Ready")

	if body, err := get(fmt.Sprintf("http://%s:8888/stop", ip)); err != nil || body != "stopping" {
		t.Fatalf("asking the job's server to stop through the tunnel: %q, %v", body, err)
	}
	// Said when the shadow finds the job COMPLETED in Slurm, or, if the virtual node reports the
	// pod Succeeded first, when the pod finishes: either way once, and Normal.
	waitForTunnelEvent(t, 2*time.Minute, ns, "notebook", "TunnelEnded", "Tunnel ended: ")
	waitFor(t, 2*time.Minute, "the pod to succeed", func() error {
		if phase := kubectl(t, "", "get", "pod", "notebook", "-n", ns, "-o", "jsonpath={.status.phase}"); phase != "Succeeded" {
			return fmt.Errorf("phase %q", phase)
		}
		return nil
	})
	wantStatus(t, user, ns, "Ended", "JobCompleted")
	if evs := tunnelEventsOf(t, ns, "notebook", "TunnelFailed"); len(evs) != 0 {
		t.Errorf("a job that completed was reported TunnelFailed: %+v", evs)
	}
	if evs := tunnelEventsOf(t, ns, "notebook", "TunnelEnded"); len(evs) != 1 || evs[0].Count > 1 {
		t.Errorf("TunnelEnded recorded as %+v, want once", evs)
	}
	managers := kubectl(t, "", "get", "pod", "notebook", "-n", ns, "--show-managed-fields", "-o", `jsonpath={range .metadata.managedFields[*]}{.manager}{"\n"}{end}`)
	for _, m := range strings.Fields(managers) {
		if strings.HasPrefix(m, "shadowgate") {
			t.Errorf("the pod was written by %s; its managers: %s", m, managers)
		}
	}
}

// The login node's sshd going away ends the tunnel (TunnelFailed, LoginUnreachable once the
// restarted forward cannot log in), and its coming back restores it (TunnelRecovered), the
// same shadow pod carrying the notebook's page again.
func TestALoginNodeThatComesBackRecoversTheTunnel(t *testing.T) {
	const ns = "tf-sshd"
	_, s, user := startOffloaded(t, ns, offloadedPod(ns, harness.HPCNode, nil))
	_, _, ip := s.readyPod(t, 3*time.Minute)
	waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelReady", "notebook-"+ns)
	restartLogin := stopLoginUntilUnreachable(t, ns)
	wantStatus(t, user, ns, "Failed", "LoginUnreachable")
	restartLogin()
	// The forward restarts with the kubelet's back-off, at most the site's MaxBackoff.
	waitForTunnelEvent(t, 3*time.Minute, ns, "notebook", "TunnelRecovered", "LoginUnreachable")
	wantStatus(t, user, ns, "Ready", "Ready")
	url := fmt.Sprintf("http://%s:8888/", ip)
	waitFor(t, time.Minute, "the notebook's page at "+url+" again", func() error {
		_, err := get(url)
		return err
	})
}

// With ReplicateCredentials false the site provides the key in the shadow's namespace; once
// it is deleted there, the next shadow pod cannot start, and the pod says which Secret is
// missing where, and that the cluster admin creates it.
func TestADeletedCredentialWithoutReplicationIsCredentialMissing(t *testing.T) {
	const ns = "tf-credential"
	kubectl(t, "", "create", "namespace", ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := site.local.ApplySiteCredentials(ctx, site.kubectl, ns); err != nil {
		t.Fatal(err)
	}
	user := scientist(t, ns)
	kubectl(t, offloadedPod(ns, harness.NoReplicationNode, map[string]string{"interlink.eu/shadow-same-ns": "true"}), "apply", "-f", "-")
	uid := kubectl(t, "", "get", "pod", "-n", ns, "notebook", "-o", "jsonpath={.metadata.uid}")
	s := shadowOf("notebook", ns, true)
	t.Cleanup(func() { deleteAndWaitGone(t, ns, "notebook", uid, s) })
	s.readyPod(t, 3*time.Minute)
	waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelReady", "notebook-"+ns)

	kubectl(t, "", "delete", "secret", "-n", ns, harness.SiteKeySecret)
	kubectl(t, "", "delete", "pod", "-n", s.namespace, "-l", "interlink.eu/shadow="+s.name, "--wait=false")
	waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelFailed", "CredentialMissing", "Secret "+harness.SiteKeySecret, "ReplicateCredentials is false")
	wantStatus(t, user, ns, "Failed", "CredentialMissing")
}
