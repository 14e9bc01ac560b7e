package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
)

// statusHostile is what a tenant writes into its pods' annotations for whoever runs
// `shadowgate status` in its namespace: an escape sequence that clears the screen and sets the
// terminal's title, a bidi override, a C1 CSI, DEL.
const statusHostile = "\x1b[2J\x1b]0;owned\x07\u202eyek eht\u009b31m\x7f"

// runStatus runs `shadowgate status` as the cluster admin with args, and returns its exit
// code, stdout and stderr.
func runStatus(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.bin, append([]string{"status", "--kubeconfig", cluster.kubectl.Kubeconfig}, args...)...)
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

// A tenant with edit in its namespace, beside an offloaded pod whose tunnel state shadowgate
// reports, writes into its own pods' annotations a tunnel state that is not JSON, one whose
// message, compute node and shadow drift carry escape sequences, and one that names no state.
// `shadowgate status -n <ns>` still lists the offloaded pod as shadowgate reported it, shows each
// of the tenant's as Unreadable (why) or with its text escaped, and prints no raw control
// character, in the table and in JSON.
func TestATenantsAnnotationsLeaveStatusReadableAndPrintable(t *testing.T) {
	const ns, tenant = "status-hostile", "scribbler"
	createNamespaces(t, ns)
	honest := offloaded{name: "trainer", namespace: ns, node: "hpc-vk", ports: []int32{8888}}
	t.Cleanup(func() {
		kubectl(t, "", "delete", "namespace", ns, honest.shadowNamespace(), "--wait=false", "--ignore-not-found")
	})
	grantEdit(t, tenant, ns)
	as := "--as=" + tenant
	mustKubectl(t, honest.json(), "apply", "-f", "-")
	eventually(t, time.Minute, "the tunnel state of "+ns+"/trainer reported", func() (bool, string) {
		v := mustKubectl(t, "", "get", "pod", "trainer", "-n", ns, "-o", `jsonpath={.metadata.annotations.interlink\.eu/tunnel-state}`)
		return v != "", "the pod has no " + tunnelstate.AnnotationTunnelState
	})

	forged, err := json.Marshal(tunnelstate.Status{State: tunnelstate.Failed, Reason: tunnelstate.ReasonLoginRefused,
		Message: "refused " + statusHostile, ComputeNode: "n" + statusHostile, Since: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	refused, err := json.Marshal(drift.Status{State: drift.Refused, Reason: "no " + statusHostile, Since: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	stateless, err := json.Marshal(map[string]string{"reason": statusHostile})
	if err != nil {
		t.Fatal(err)
	}
	for name, annotations := range map[string][]string{
		"not-json":  {tunnelstate.AnnotationTunnelState + "={" + statusHostile},
		"escapes":   {tunnelstate.AnnotationTunnelState + "=" + string(forged), drift.Annotation + "=" + string(refused)},
		"no-state":  {tunnelstate.AnnotationTunnelState + "=" + string(stateless)},
		"bad-drift": {tunnelstate.AnnotationTunnelState + "=" + string(forged), drift.Annotation + "={" + statusHostile},
	} {
		mustKubectl(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+", namespace: "+ns+"}\nspec: {containers: [{name: main, image: busybox}]}\n", as, "create", "-f", "-")
		mustKubectl(t, "", append([]string{as, "annotate", "pod", name, "-n", ns}, annotations...)...)
	}

	code, out, errOut := runStatus(t, "-n", ns)
	rawControls(t, "status's table", out+errOut)
	if code != exitDeniedCode {
		t.Errorf("status exited %d, want %d for the Unreadable and Failed rows; stderr:\n%s", code, exitDeniedCode, errOut)
	}
	lines := map[string]string{}
	for line := range strings.Lines(out) {
		if name, _, ok := strings.Cut(line, " "); ok {
			lines[name] = line
		}
	}
	for pod, want := range map[string][]string{
		"trainer":   {"portforward", string(tunnelstate.Starting)},
		"not-json":  {"Unreadable", "annotation interlink.eu/tunnel-state"},
		"escapes":   {"Failed", `LoginRefused: refused \x1b[2J\x1b]0;owned\a\u202eyek`, `n\x1b[2J\x1b]0;owned\a\u202eyek eht\u009b31m\x7f`, "Refused"},
		"no-state":  {"Unreadable", "holds no state"},
		"bad-drift": {"Failed", "Unreadable"},
	} {
		line, listed := lines[pod]
		if !listed {
			t.Errorf("status does not list %s; it printed:\n%s%s", pod, out, errOut)
			continue
		}
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("status's line of %s lacks %q: %q", pod, w, line)
			}
		}
	}
	if line := lines["trainer"]; strings.Contains(line, "Unreadable") {
		t.Errorf("the offloaded pod's own tunnel state is shown Unreadable: %q", line)
	}

	code, out, errOut = runStatus(t, "-n", ns, "escapes")
	rawControls(t, "status of one pod", out+errOut)
	if want := `Shadow: the policy in force would refuse this pod; it and its shadow are left as they are: no \x1b[2J`; !strings.Contains(out, want) || code != exitDeniedCode {
		t.Errorf("status of one pod exited %d and lacks %q:\n%s%s", code, want, out, errOut)
	}

	code, out, errOut = runStatus(t, "-n", ns, "-o", "json")
	var doc struct {
		Pods []struct {
			Name   string           `json:"name"`
			Tunnel *json.RawMessage `json:"tunnel"`
			Error  string           `json:"error"`
		} `json:"pods"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitDeniedCode {
		t.Fatalf("status -o json exited %d and printed no document (%v):\n%s%s", code, err, out, errOut)
	}
	rawControls(t, "status's JSON, decoded", decodedStrings(t, out))
	errs := map[string]string{}
	for _, p := range doc.Pods {
		errs[p.Name] = p.Error
		if p.Name == "not-json" && p.Tunnel != nil {
			t.Errorf("the JSON of an unreadable tunnel state holds a tunnel: %s", *p.Tunnel)
		}
	}
	for pod, want := range map[string]string{"trainer": "", "not-json": "interlink.eu/tunnel-state", "no-state": "holds no state", "bad-drift": "interlink.eu/shadow-drift", "escapes": ""} {
		got, listed := errs[pod]
		if !listed || (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("status -o json gives %s the error %q (listed %v), want one saying %q", pod, got, listed, want)
		}
	}
}

// exitDeniedCode is status's exit code when a tunnel is Failed or Unreadable.
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
