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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
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
		"A queued job shows Slurm's reason and expected start.": {
			rows: []podTunnel{{Name: "queued", Tunnel: &tunnelstate.Status{State: tunnelstate.WaitingForNode, Reason: tunnelstate.ReasonWaitingForNode,
				Message:    "job 12 is PENDING in Slurm (reason BeginTime, expected start 2026-12-06T07:00:00Z): waiting for it to run",
				WaitReason: "BeginTime", ExpectedStart: "2026-12-06T07:00:00Z", Since: now}}},
			want: []string{"WaitingForNode", "WaitingForNode (Slurm: BeginTime, expected start 2026-12-06T07:00:00Z)"},
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
			want: []string{"No pods with a Tunnel"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			table{}.print(&out, tc.rows, now)
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// hostile is text a shadow container prints: an
// escape sequence that clears the screen and sets the title, a bidi override, a C1 CSI, DEL.
const hostile = "\x1b[2J\x1b]0;owned\x07\u202eyek eht\u009b31m\x7f"

// hostileEscaped is hostile as status prints it.
const hostileEscaped = `\x1b[2J\x1b]0;owned\a\u202eyek eht\u009b31m\x7f`

func statusPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "user", UID: types.UID(name + "-uid")},
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

// statusClient is a fake API server holding objs, with the Events' index status reads by.
func statusClient(objs ...client.Object) client.WithWatch {
	return statusServer(objs...).Build()
}

// statusServer is statusClient's builder, for interceptors.
func statusServer(objs ...client.Object) *fake.ClientBuilder {
	return shadowtest.Client(objs...).WithIndex(&corev1.Event{}, "involvedObject.uid", func(o client.Object) []string {
		return []string{string(o.(*corev1.Event).InvolvedObject.UID)}
	})
}

// tunnelOf is pod's Tunnel holding st, with shadow (nil for none).
func tunnelOf(pod *corev1.Pod, st tunnelstate.Status, shadow *drift.Status) *v1alpha1.Tunnel {
	var status v1alpha1.TunnelStatus
	st.Into(&status)
	if shadow != nil {
		status.Shadow = shadow.API()
	}
	return shadowtest.TunnelSaying(pod, status)
}

// status lists the pods of a namespace that have a Tunnel, finished ones too, each with what
// its own Tunnel holds, printed escaped in the table and in JSON; a Tunnel an earlier pod of
// the same name left is none of the pod's.
func TestStatusListsThePodsTunnels(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	ready := tunnelstate.Status{State: tunnelstate.Ready, Reason: tunnelstate.ReasonReady, ComputeNode: "10.0.0.3", ForwardMode: "exec", Since: now}
	failed := tunnelstate.Status{State: tunnelstate.Failed, Reason: tunnelstate.ReasonLoginRefused, Message: "refused " + hostile,
		ComputeNode: "n" + hostile, Since: now}
	ended := tunnelstate.Status{State: tunnelstate.Ended, Reason: tunnelstate.ReasonNoRunningJob, Since: now}
	aReady, eHostile, gRefused, hPlain := statusPod("a-ready"), statusPod("e-hostile-message"), statusPod("g-hostile-refusal"), statusPod("h-plain")
	iFinished, jReplaced := statusPod("i-finished"), statusPod("j-replaced")
	iFinished.Status.Phase = corev1.PodSucceeded
	earlier := jReplaced.DeepCopy()
	earlier.UID = "earlier-uid"
	objs := []client.Object{aReady, eHostile, gRefused, hPlain, iFinished, jReplaced,
		tunnelOf(aReady, ready, &drift.Status{State: drift.Current}),
		tunnelOf(eHostile, failed, nil),
		tunnelOf(gRefused, ready, &drift.Status{State: drift.Refused, Reason: "no " + hostile, Since: now}),
		tunnelOf(iFinished, ended, nil),
		tunnelOf(earlier, ready, nil),
		tunnelOf(statusPod("k-deleted"), ready, nil),
	}
	rows, err := tunnels(context.Background(), statusClient(objs...), "user", "")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	table{}.print(&out, rows, now)
	onlyPrintable(t, "the table", out.String())
	lines := map[string]string{}
	for line := range strings.Lines(out.String()) {
		if name, _, ok := strings.Cut(line, " "); ok {
			lines[name] = line
		}
	}
	for name, tc := range map[string]struct {
		pod  string
		line []string // in the pod's line of the table; nil: the pod is not listed
	}{
		"A Ready tunnel is shown as it is.":                           {pod: "a-ready", line: []string{"10.0.0.3", "exec", "Ready", "Current"}},
		"A tunnel's message and compute node are shown escaped.":      {pod: "e-hostile-message", line: []string{"Failed", "LoginRefused: refused " + hostileEscaped, "n" + hostileEscaped}},
		"A refused shadow is shown Refused.":                          {pod: "g-hostile-refusal", line: []string{"Ready", "Refused"}},
		"A finished pod keeps its last state.":                        {pod: "i-finished", line: []string{"Ended", "NoRunningJob"}},
		"A pod that has no Tunnel is not listed.":                     {pod: "h-plain"},
		"A pod whose name an earlier pod's Tunnel has is not listed.": {pod: "j-replaced"},
		"A Tunnel whose pod is gone is not listed.":                   {pod: "k-deleted"},
	} {
		t.Run(name, func(t *testing.T) {
			line, listed := lines[tc.pod]
			if listed != (tc.line != nil) {
				t.Fatalf("pod %s listed: %v, want %v:\n%s", tc.pod, listed, tc.line != nil, out.String())
			}
			for _, w := range tc.line {
				if !strings.Contains(line, w) {
					t.Errorf("the line of %s lacks %q: %q", tc.pod, w, line)
				}
			}
		})
	}
	for _, r := range rows {
		if r.Name == "g-hostile-refusal" && r.Shadow.Reason != "no "+hostileEscaped {
			t.Errorf("a refusal's reason is %q, want it escaped", r.Shadow.Reason)
		}
	}
	if err := exitFor(rows); err == nil {
		t.Error("status of a Failed tunnel exits 0")
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
		var strs []string
		collectStrings(p, &strs)
		onlyPrintable(t, "the JSON of "+fmt.Sprint(p["name"]), strings.Join(strs, "\n"))
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
	pod := statusPod("notebook")
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "notebook.1", Namespace: "user"}, Reason: "TunnelFailed", Message: "LoginRefused: " + hostile,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "notebook", Namespace: "user", UID: pod.UID}, LastTimestamp: metav1.Now()}
	rows, err := tunnels(context.Background(), statusClient(pod, tunnelOf(pod, tunnelstate.Status{State: tunnelstate.Failed, Since: time.Now()}, nil), ev), "user", "notebook")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	table{}.print(&out, rows, time.Now())
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
		"Every tunnel Ready exits 0.":           {rows: []podTunnel{{Tunnel: ready}, {Tunnel: ready}}},
		"A Failed tunnel exits 1.":              {rows: []podTunnel{{Tunnel: ready}, {Tunnel: &tunnelstate.Status{State: tunnelstate.Failed}}}, denied: true},
		"A pod without a tunnel state exits 1.": {rows: []podTunnel{{}}, denied: true},
		"An Ended tunnel exits 0.":              {rows: []podTunnel{{Tunnel: &tunnelstate.Status{State: tunnelstate.Ended}}}},
		"No pods exit 0.":                       {},
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
