package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

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
