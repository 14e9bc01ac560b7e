package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
)

// statusHostile is what a tenant writes into its pods' annotations for whoever runs
// `shadowgate status` in its namespace: an escape sequence that clears the screen and sets the
// terminal's title, a bidi override, a C1 CSI, DEL.
const statusHostile = "\x1b[2J\x1b]0;owned\x07\u202eyek eht\u009b31m\x7f"

// runStatusAs runs `shadowgate status` as the user of kubeconfig with args, and returns its
// exit code, stdout and stderr.
func runStatusAs(t *testing.T, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.bin, append([]string{"status", "--kubeconfig", kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("shadowgate status: %v", err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// rawControls fails the test for every rune of out that is neither printable nor a newline.
func rawControls(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Errorf("%s holds %U raw:\n%q", what, r, out)
			return
		}
	}
}

// A tenant with edit in its namespace reads its pods' Tunnels and writes none: it cannot
// create one, patch one's status, or delete one. What it writes on its own pods (annotations
// of the names shadowgate once wrote there, carrying escape sequences) changes nothing that
// `shadowgate status`, run as that tenant, prints: the offloaded pod is listed as shadowgate
// reported it, a pod with no Tunnel is not, and no raw control character reaches the table or
// the JSON.
func TestATenantReadsItsTunnelsAndCannotWriteThem(t *testing.T) {
	const ns, tenant = "status-hostile", "scribbler"
	createNamespaces(t, ns)
	honest := offloaded{name: "trainer", namespace: ns, node: "hpc-vk", ports: []int32{8888}}
	t.Cleanup(func() {
		kubectl(t, "", "delete", "pods", "--all", "-n", ns, "--wait=false")
		kubectl(t, "", "delete", "namespace", ns, honest.shadowNamespace(), "--wait=false", "--ignore-not-found")
	})
	grantEdit(t, tenant, ns)
	as := "--as=" + tenant
	mustKubectl(t, honest.json(), "apply", "-f", "-")
	eventually(t, time.Minute, "the Tunnel of "+ns+"/trainer", func() (bool, string) {
		r := kubectl(t, "", as, "get", "tunnel", "trainer", "-n", ns, "-o", `jsonpath={.status.state}`)
		return r.Err == nil && r.Stdout != "", "the tenant reads no state: " + r.Output()
	})

	forgedTunnel := `{"apiVersion":"shadowgate.interlink.eu/v1alpha1","kind":"Tunnel","metadata":{"name":"plain","namespace":"` + ns + `"}}`
	for what, args := range map[string][]string{
		"create a Tunnel":         {"create", "-f", "-"},
		"patch a Tunnel's status": {"patch", "tunnel", "trainer", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"state":"Ready"}}`},
		"patch a Tunnel":          {"label", "tunnel", "trainer", "-n", ns, "x=y"},
		"delete a Tunnel":         {"delete", "tunnel", "trainer", "-n", ns},
	} {
		stdin := ""
		if args[0] == "create" {
			stdin = forgedTunnel
		}
		if r := kubectl(t, stdin, append([]string{as}, args...)...); r.Err == nil || !strings.Contains(r.Stderr, "forbidden") {
			t.Errorf("the tenant could %s:\n%s", what, r.Output())
		}
	}

	forged, err := json.Marshal(tunnelstate.Status{State: tunnelstate.Failed, Reason: tunnelstate.ReasonLoginRefused,
		Message: "refused " + statusHostile, ComputeNode: "n" + statusHostile, Since: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	hostile := []string{"interlink.eu/tunnel-state=" + string(forged), "interlink.eu/shadow-drift={" + statusHostile}
	mustKubectl(t, "", append([]string{as, "annotate", "pod", "trainer", "-n", ns}, hostile...)...)
	mustKubectl(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: plain, namespace: "+ns+"}\nspec: {containers: [{name: main, image: busybox}]}\n", as, "create", "-f", "-")
	mustKubectl(t, "", append([]string{as, "annotate", "pod", "plain", "-n", ns}, hostile...)...)

	kubeconfig := impersonating(t, tenant)
	code, out, errOut := runStatusAs(t, kubeconfig, "-n", ns)
	rawControls(t, "status's table", out+errOut)
	// This control plane runs no scheduler and no node: the trainer has no NODE, its shadow pod
	// is never made, and its tunnel stays Starting; its node has no front door, so no URL.
	trainer := regexp.MustCompile(`(?m)^trainer +- +- +portforward +Starting +- +\S+ +Current +- *$`)
	if code != 0 || strings.Contains(out, "plain") || !trainer.MatchString(out) {
		t.Errorf("status, run as the tenant, exited %d and does not list trainer as shadowgate reported it, and only it:\n%s%s", code, out, errOut)
	}
	code, out, errOut = runStatusAs(t, kubeconfig, "-n", ns, "-o", "json")
	if !json.Valid([]byte(out)) || code == 2 {
		t.Fatalf("status -o json exited %d and printed no document:\n%s%s", code, out, errOut)
	}
	rawControls(t, "status's JSON, decoded", decodedStrings(t, out))

	// Nor can a write with more rights put another pod's state in a Tunnel: the API server
	// refuses a status about another pod than spec.podUID, and a change of spec.
	for what, args := range map[string][]string{
		"a status about another pod": {"patch", "tunnel", "trainer", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"podUID":"00000000-0000-0000-0000-000000000032"}}`},
		"another pod's UID in spec":  {"patch", "tunnel", "trainer", "-n", ns, "--type=merge", "-p", `{"spec":{"podUID":"00000000-0000-0000-0000-000000000032"}}`},
	} {
		if r := kubectl(t, "", args...); r.Err == nil || !strings.Contains(r.Stderr, "Invalid") {
			t.Errorf("the cluster admin wrote %s into a Tunnel:\n%s", what, r.Output())
		}
	}
}

// impersonating is a kubeconfig of the cluster admin's that acts as user, as kubectl --as
// does, for programs that take a kubeconfig alone.
func impersonating(t *testing.T, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cluster.kubectl.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// exitDeniedCode is status's exit code when a tunnel is Failed or a pod has no tunnel state.
const exitDeniedCode = 1

// decodedStrings is every string of the JSON document out, decoded, one a line.
func decodedStrings(t *testing.T, out string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v + "\n")
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}
