package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
)

func TestPrintTunnels(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	failed := &tunnelstate.Status{State: tunnelstate.Failed, Reason: tunnelstate.ReasonForwardingProhibited,
		Message: "channel to 10.0.0.3:8888 administratively prohibited", ComputeNode: "10.0.0.3", ForwardMode: "portforward", Since: now.Add(-90 * time.Second)}
	ready := &tunnelstate.Status{State: tunnelstate.Ready, Reason: tunnelstate.ReasonReady, ComputeNode: "10.0.0.3", ForwardMode: "exec", Since: now.Add(-2 * time.Hour)}
	for name, tc := range map[string]struct {
		rows []podTunnel
		want []string
	}{
		"A failed tunnel shows its reason, message, compute node, mode and age.": {
			rows: []podTunnel{{Name: "notebook", Node: "hpc-vk", Tunnel: failed}},
			want: []string{"POD", "COMPUTE-NODE", "notebook", "hpc-vk", "10.0.0.3", "portforward", "Failed", "ForwardingProhibited: channel to 10.0.0.3:8888", "90s"},
		},
		"A ready tunnel shows Ready without a message.": {
			rows: []podTunnel{{Name: "a", Tunnel: ready}, {Name: "b", Tunnel: failed}},
			want: []string{"Ready", "exec", "120m", "Failed"},
		},
		"A pod without a state says so, and why that may be.": {
			rows: []podTunnel{{Name: "plain", Node: "worker"}},
			want: []string{"no tunnel state reported", "on no SSH-shadow virtual node"},
		},
		"One pod's last tunnel Event is printed under the table.": {
			rows: []podTunnel{{Name: "notebook", Tunnel: failed, LastEvent: "TunnelFailed: ForwardingProhibited: ... set ForwardMode: exec"}},
			want: []string{"Last tunnel event: TunnelFailed: ForwardingProhibited"},
		},
		"A shadow that matches the policy in force says Current.": {
			rows: []podTunnel{{Name: "a", Tunnel: ready, Shadow: drift.Status{State: drift.Current}}},
			want: []string{"SHADOW", "Current"},
		},
		"A shadow the policy in force would refuse says why, for one pod.": {
			rows: []podTunnel{{Name: "a", Tunnel: ready, Shadow: drift.Status{State: drift.Refused, Reason: `the policy in force lists no virtual node "hpc-vk"`}}},
			want: []string{"Refused", `Shadow: the policy in force would refuse this pod; it and its shadow are left as they are: the policy in force lists no virtual node "hpc-vk"`},
		},
		"A shadow waiting for its roll says so.": {
			rows: []podTunnel{{Name: "a", Tunnel: ready, Shadow: drift.Status{State: drift.OutOfDate}}},
			want: []string{"OutOfDate", "waits for its turn to be rolled"},
		},
		"An empty namespace says it has none.": {
			want: []string{"No pods with a tunnel state"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			printTunnels(&out, tc.rows, now)
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// hostile is text a tenant writes into its pod's annotations, or a shadow container prints: an
// escape sequence that clears the screen and sets the title, a bidi override, a C1 CSI, DEL.
const hostile = "\x1b[2J\x1b]0;owned\x07\u202eyek eht\u009b31m\x7f"

// hostileEscaped is hostile as status prints it.
const hostileEscaped = `\x1b[2J\x1b]0;owned\a\u202eyek eht\u009b31m\x7f`

func statusPod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "user", UID: types.UID(name + "-uid"), Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: "hpc-vk"}}
}

// onlyPrintable fails the test for every rune of out that is neither printable nor a newline.
func onlyPrintable(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Errorf("%s holds %U raw:\n%s", what, r, out)
		}
	}
}

// One pod's annotation that cannot be read makes its row Unreadable, with why, and no other;
// what a pod's annotations and Events say is printed escaped, in the table and in JSON.
func TestStatusShowsAnUnreadableRowAndGoesOn(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	ready := tunnelstate.Status{State: tunnelstate.Ready, Reason: tunnelstate.ReasonReady, ComputeNode: "10.0.0.3", ForwardMode: "exec", Since: now}.Encode()
	failed := tunnelstate.Status{State: tunnelstate.Failed, Reason: tunnelstate.ReasonLoginRefused, Message: "refused " + hostile,
		ComputeNode: "n" + hostile, Since: now}.Encode()
	forged, err := json.Marshal(map[string]string{"state": hostile})
	if err != nil {
		t.Fatal(err)
	}
	pods := []runtime.Object{
		statusPod("a-ready", map[string]string{tunnelstate.AnnotationTunnelState: ready}),
		statusPod("b-not-json", map[string]string{tunnelstate.AnnotationTunnelState: "{" + hostile}),
		statusPod("c-no-state", map[string]string{tunnelstate.AnnotationTunnelState: `{"reason":"Ready"}`}),
		statusPod("d-forged-state", map[string]string{tunnelstate.AnnotationTunnelState: string(forged)}),
		statusPod("e-hostile-message", map[string]string{tunnelstate.AnnotationTunnelState: failed}),
		statusPod("f-bad-drift", map[string]string{tunnelstate.AnnotationTunnelState: ready, drift.Annotation: "{" + hostile}),
		statusPod("g-hostile-refusal", map[string]string{tunnelstate.AnnotationTunnelState: ready,
			drift.Annotation: drift.Status{State: drift.Refused, Reason: "no " + hostile, Since: now}.Encode()}),
		statusPod("h-plain", nil),
	}
	rows, err := tunnels(context.Background(), fake.NewClientset(pods...), "user", "")
	if err != nil {
		t.Fatalf("one pod's annotation failed the whole namespace: %v", err)
	}
	var table bytes.Buffer
	printTunnels(&table, rows, now)
	onlyPrintable(t, "the table", table.String())
	lines := map[string]string{}
	for line := range strings.Lines(table.String()) {
		if name, _, ok := strings.Cut(line, " "); ok {
			lines[name] = line
		}
	}
	byName := map[string]podTunnel{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	for name, tc := range map[string]struct {
		pod   string
		line  []string // in the pod's line of the table
		error string   // in the row's error, "" for none
	}{
		"A readable state is shown as it is, beside unreadable ones.": {pod: "a-ready", line: []string{"10.0.0.3", "exec", "Ready", "Current"}},
		"A state that is not JSON is Unreadable, saying why, escaped.": {
			pod: "b-not-json", line: []string{"Unreadable", "annotation interlink.eu/tunnel-state"}, error: "interlink.eu/tunnel-state",
		},
		"A state without a state is Unreadable.": {pod: "c-no-state", line: []string{"Unreadable", "holds no state"}, error: "holds no state"},
		"A forged state of no tunnel is Unreadable, its value escaped.": {
			pod: "d-forged-state", line: []string{"Unreadable", `unknown state "\x1b[2J`}, error: "unknown state",
		},
		"A tunnel's message and compute node are shown escaped.": {
			pod: "e-hostile-message", line: []string{"Failed", "LoginRefused: refused " + hostileEscaped, "n" + hostileEscaped},
		},
		"A drift that cannot be read makes the shadow Unreadable, the tunnel still shown.": {
			pod: "f-bad-drift", line: []string{"Ready", "Unreadable"}, error: "interlink.eu/shadow-drift",
		},
		"A pod that has no tunnel state is not listed.": {pod: "h-plain"},
	} {
		t.Run(name, func(t *testing.T) {
			r, listed := byName[tc.pod]
			if tc.pod == "h-plain" {
				if listed {
					t.Errorf("a pod without a tunnel state is listed: %+v", r)
				}
				return
			}
			if !listed {
				t.Fatalf("pod %s is not listed:\n%s", tc.pod, table.String())
			}
			for _, w := range tc.line {
				if !strings.Contains(lines[tc.pod], w) {
					t.Errorf("the line of %s lacks %q: %q", tc.pod, w, lines[tc.pod])
				}
			}
			if tc.error == "" && r.Error != "" || !strings.Contains(r.Error, tc.error) {
				t.Errorf("the row's error is %q, want one saying %q", r.Error, tc.error)
			}
		})
	}
	if r := byName["g-hostile-refusal"]; r.Shadow.Reason != "no "+hostileEscaped {
		t.Errorf("a refusal's reason is %q, want it escaped", r.Shadow.Reason)
	}
	if err := exitFor(rows); err == nil {
		t.Error("status of unreadable rows exits 0")
	}

	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	if err := enc.Encode(map[string]any{"pods": rows}); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Pods []map[string]any `json:"pods"`
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
		t.Fatal(err)
	}
	for _, p := range decoded.Pods {
		flat, _ := json.Marshal(p)
		var strs []string
		collectStrings(p, &strs)
		onlyPrintable(t, "the JSON of "+fmt.Sprint(p["name"]), strings.Join(strs, "\n"))
		if p["name"] == "b-not-json" && (p["tunnel"] != nil || !strings.Contains(fmt.Sprint(p["error"]), "interlink.eu/tunnel-state")) {
			t.Errorf("the JSON of an unreadable state has no error, or a tunnel: %s", flat)
		}
	}
}

// collectStrings appends every string in v, a decoded JSON value.
func collectStrings(v any, out *[]string) {
	switch v := v.(type) {
	case string:
		*out = append(*out, v)
	case map[string]any:
		for _, e := range v {
			collectStrings(e, out)
		}
	case []any:
		for _, e := range v {
			collectStrings(e, out)
		}
	}
}

// For one pod, the last tunnel Event is printed escaped too.
func TestStatusPrintsTheLastEventEscaped(t *testing.T) {
	pod := statusPod("notebook", map[string]string{tunnelstate.AnnotationTunnelState: tunnelstate.Status{State: tunnelstate.Failed, Since: time.Now()}.Encode()})
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "notebook.1", Namespace: "user"}, Reason: "TunnelFailed", Message: "LoginRefused: " + hostile,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "notebook", Namespace: "user", UID: pod.UID}, LastTimestamp: metav1.Now()}
	rows, err := tunnels(context.Background(), fake.NewClientset(pod, ev), "user", "notebook")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printTunnels(&out, rows, time.Now())
	onlyPrintable(t, "the output", out.String())
	if want := "Last tunnel event: TunnelFailed: LoginRefused: " + hostileEscaped; !strings.Contains(out.String(), want) {
		t.Errorf("the output lacks %q:\n%s", want, out.String())
	}
}

func TestStatusExitCode(t *testing.T) {
	ready := &tunnelstate.Status{State: tunnelstate.Ready}
	for name, tc := range map[string]struct {
		rows   []podTunnel
		denied bool
	}{
		"Every tunnel Ready exits 0.":                     {rows: []podTunnel{{Tunnel: ready}, {Tunnel: ready}}},
		"A Failed tunnel exits 1.":                        {rows: []podTunnel{{Tunnel: ready}, {Tunnel: &tunnelstate.Status{State: tunnelstate.Failed}}}, denied: true},
		"A pod without a tunnel state exits 1.":           {rows: []podTunnel{{}}, denied: true},
		"An Unreadable tunnel state exits 1.":             {rows: []podTunnel{{Tunnel: ready}, {tunnelUnreadable: true, Error: "x"}}, denied: true},
		"A Ready tunnel with an unreadable drift exits 1": {rows: []podTunnel{{Tunnel: ready, Error: "x"}}, denied: true},
		"No pods exit 0.":                                 {},
	} {
		t.Run(name, func(t *testing.T) {
			err := exitFor(tc.rows)
			var e *exitError
			if denied := errors.As(err, &e) && e.code == exitDenied; denied != tc.denied || (err != nil && !denied) {
				t.Errorf("exitFor = %v, want denied %v", err, tc.denied)
			}
		})
	}
}
