package offload

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// podEvent is an Event on a pod as kubectl reads it.
type podEvent struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// podEvents are the Events on the pod ns/name.
func podEvents(ns, name string) ([]podEvent, error) {
	out, err := kubectlOutput("get", "events", "-n", ns, "--field-selector", "involvedObject.kind=Pod,involvedObject.name="+name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []podEvent `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("kubectl get events: %w: %s", err, out)
	}
	return list.Items, nil
}

// tunnelEventsOf are the pod's Events with reason, in the order kubectl lists them.
func tunnelEventsOf(t *testing.T, ns, name, reason string) []podEvent {
	t.Helper()
	evs, err := podEvents(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var out []podEvent
	for _, e := range evs {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// waitForTunnelEvent waits for an Event with reason on the pod whose message holds every one
// of parts, then checks that kubectl describe shows it, as the pod's owner would look.
func waitForTunnelEvent(t *testing.T, timeout time.Duration, ns, name, reason string, parts ...string) podEvent {
	t.Helper()
	var found podEvent
	waitFor(t, timeout, fmt.Sprintf("an Event %s on pod %s/%s saying %q", reason, ns, name, parts), func() error {
		evs, err := podEvents(ns, name)
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range evs {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason != reason {
				continue
			}
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(e.Message, p)
			}
			if ok {
				found = e
				return nil
			}
		}
		return fmt.Errorf("the pod's Events:\n  %s", strings.Join(seen, "\n  "))
	})
	describe := kubectl(t, "", "describe", "pod", "-n", ns, name)
	if !strings.Contains(describe, reason) || !strings.Contains(describe, parts[0]) {
		t.Errorf("kubectl describe pod %s/%s does not show the %s Event saying %q:\n%s", ns, name, reason, parts[0], describe)
	}
	return found
}

// statusRow is one row of shadowgate status -o json.
type statusRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node"`
	Tunnel    *struct {
		State       string `json:"state"`
		Reason      string `json:"reason"`
		Message     string `json:"message"`
		ComputeNode string `json:"computeNode"`
		ForwardMode string `json:"forwardMode"`
		Service     string `json:"service"`
	} `json:"tunnel"`
	Shadow struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
	} `json:"shadow"`
	LastEvent string `json:"lastEvent"`
}

// scientist is a kubeconfig for a user who may read ns and nothing else: the built-in view
// ClusterRole bound in ns, as a namespace's reader holds it. Its Tunnels come with it (the
// role shadowgate's chart aggregates into view, by the controller-manager's aggregation).
func scientist(t *testing.T, ns string) string {
	t.Helper()
	kubectl(t, fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: scientist, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: scientist, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: scientist, namespace: %[1]s}]
`, ns), "apply", "-f", "-")
	path := filepath.Join(t.TempDir(), "scientist.kubeconfig")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := site.cp.ServiceAccountKubeconfig(ctx, site.kubectl, ns, "scientist", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// shadowgateStatus runs shadowgate status with kubeconfig and returns its output and exit code.
func shadowgateStatus(t *testing.T, kubeconfig string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, site.bin, append([]string{"status", "--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("shadowgate status: %v", err)
	}
	return string(out), code
}

// tunnelStatus is the one pod's row of shadowgate status -o json, run as the scientist.
func tunnelStatus(t *testing.T, kubeconfig, ns, name string) statusRow {
	t.Helper()
	out, code := shadowgateStatus(t, kubeconfig, "-n", ns, name, "-o", "json")
	var doc struct {
		Pods []statusRow `json:"pods"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Pods) != 1 {
		t.Fatalf("shadowgate status -o json (exit %d): %v\n%s", code, err, out)
	}
	row := doc.Pods[0]
	if failed := row.Tunnel == nil || row.Tunnel.State == "Failed"; failed != (code == 1) {
		t.Errorf("shadowgate status exited %d for a pod whose tunnel is %+v", code, row.Tunnel)
	}
	return row
}

// shadowPodsAndReporterLog is, for a failure message, the pods of ns's shadow namespace as the
// API server has them and the lines of shadowgate's log about ns: what the tunnel reporter
// saw and wrote.
func shadowPodsAndReporterLog(ns string) string {
	shadowNS := shadowOf("notebook", ns, false).namespace
	pods, err := kubectlOutput("get", "pods", "-n", shadowNS, "-o",
		`custom-columns=NAME:.metadata.name,PHASE:.status.phase,DELETED:.metadata.deletionTimestamp,OWNER:.metadata.ownerReferences[0].name,RESTARTS:.status.containerStatuses[*].restartCount`)
	if err != nil {
		pods = err.Error()
	}
	tunnel, err := kubectlOutput("get", "tunnel", "-n", ns, "notebook", "-o", `jsonpath={.status}`)
	if err != nil {
		tunnel = err.Error()
	}
	data, _ := os.ReadFile(site.sg.Log)
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, ns) {
			lines = append(lines, l)
		}
	}
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return fmt.Sprintf("--- the pods of %s:\n%s\n--- the pod's Tunnel status: %s\n--- shadowgate's log about %s:\n%s",
		shadowNS, pods, tunnel, ns, strings.Join(lines, "\n"))
}

// stopLoginUntilUnreachable stops the site's login node hpc and waits for the notebook of ns
// to say LoginUnreachable; it returns what starts the login node again, which the test's end
// does if the test has not.
func stopLoginUntilUnreachable(t *testing.T, ns string) (restart func()) {
	t.Helper()
	hpc := site.local.HPC
	if err := hpc.StopLogin("hpc"); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := hpc.StartLogin("hpc"); err != nil {
				t.Error(err)
			}
		}
	})
	waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelFailed", "LoginUnreachable")
	return func() {
		restarted = true
		if err := hpc.StartLogin("hpc"); err != nil {
			t.Fatal(err)
		}
	}
}
