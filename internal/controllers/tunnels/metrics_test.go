package tunnels

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// The tunnel metrics follow one pod's tunnel through Ready, a dip while it is checked, Ready
// again and its end: the gauge holds it once, under its virtual node, state and reason; each
// change of state is counted once; the time from the pod's creation to its first Ready is
// observed once, not again when it comes back from the dip.
func TestTheTunnelMetricsFollowATunnelByItsVirtualNode(t *testing.T) {
	for name, tc := range map[string]struct {
		nodeName string
		wantNode string
	}{
		"A pod on a virtual node of the policy is counted under that node.":  {nodeName: "vk-hpc", wantNode: "vk-hpc"},
		"A pod on a node the policy does not name is counted under unknown.": {nodeName: "vk-gone", wantNode: metrics.NodeUnknown},
	} {
		t.Run(name, func(t *testing.T) {
			created := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "pod-uid", CreationTimestamp: metav1.NewTime(created)},
				Spec: corev1.PodSpec{NodeName: tc.nodeName}}
			shadowPod := forwardingShadowPod()
			started := metav1.NewTime(time.Now().Add(-time.Hour))
			setReady := func(ready bool) {
				shadowPod.Status = corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ssh-forward", Ready: ready,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}
			}
			setReady(true)
			c := reporterClient(t, interceptor.Funcs{}, pod, shadowDeploymentOf("pod-uid"), shadowPod)
			r, _ := testReporter(t, c)
			reg := prometheus.NewRegistry()
			m, err := metrics.New(reg)
			if err != nil {
				t.Fatal(err)
			}
			r.metrics = m
			r.policies = shadowtest.FixedPolicy{Policy: &policy.Policy{VirtualNodes: map[string]policy.VirtualNode{"vk-hpc": {}}}}
			r.now = func() time.Time { return created.Add(90 * time.Second) }
			key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "user", Name: "notebook"}}
			reconcileWith := func(step string) {
				t.Helper()
				if err := c.Status().Update(context.Background(), shadowPod); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Reconcile(context.Background(), key); err != nil {
					t.Fatalf("%s: %v", step, err)
				}
			}
			// gauge checks the one series of shadowgate_tunnels there is: a series that counts
			// no tunnel is removed.
			gauge := func(step string, state tunnelstate.State, reason tunnelstate.Reason) {
				t.Helper()
				want := fmt.Sprintf(`
# HELP shadowgate_tunnels %s
# TYPE shadowgate_tunnels gauge
shadowgate_tunnels{node=%q,reason=%q,state=%q} 1
`, tunnelsHelp(t, reg), tc.wantNode, reason, state)
				if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shadowgate_tunnels"); err != nil {
					t.Errorf("%s: %v", step, err)
				}
			}

			reconcileWith("ready")
			gauge("ready", tunnelstate.Ready, tunnelstate.ReasonReady)
			setReady(false)
			reconcileWith("the dip")
			gauge("the dip", tunnelstate.Starting, "")
			setReady(true)
			reconcileWith("ready again")
			reconcileWith("ready, looked at again")
			gauge("ready again", tunnelstate.Ready, tunnelstate.ReasonReady)

			pod.Status.Phase = corev1.PodSucceeded
			if err := c.Status().Update(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Reconcile(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			if n := testutil.CollectAndCount(m.Tunnels); n != 0 {
				t.Errorf("%d series of shadowgate_tunnels once the pod finished, want none", n)
			}

			for _, tr := range []struct {
				from string
				to   tunnelstate.State
			}{
				{metrics.TransitionFromNone, tunnelstate.Ready},
				{string(tunnelstate.Ready), tunnelstate.Starting},
				{string(tunnelstate.Starting), tunnelstate.Ready},
				{string(tunnelstate.Ready), tunnelstate.Ended},
			} {
				if got := testutil.ToFloat64(m.TunnelTransitions.WithLabelValues(tc.wantNode, tr.from, string(tr.to))); got != 1 {
					t.Errorf("shadowgate_tunnel_transitions_total{node=%q,from=%q,to=%q} is %v, want 1", tc.wantNode, tr.from, tr.to, got)
				}
			}
			if n := testutil.CollectAndCount(m.TunnelTransitions); n != 4 {
				t.Errorf("%d series of shadowgate_tunnel_transitions_total, want the 4 above", n)
			}
			count, sum := readySeconds(t, reg, tc.wantNode)
			if count != 1 || sum != 90 {
				t.Errorf("shadowgate_tunnel_ready_seconds{node=%q} holds %d observations summing to %vs, want 1 of 90s (creation to first Ready)", tc.wantNode, count, sum)
			}
		})
	}
}

// tunnelsHelp is the help text of shadowgate_tunnels.
func tunnelsHelp(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "shadowgate_tunnels" {
			return f.GetHelp()
		}
	}
	return ""
}

// readySeconds is the count and sum of shadowgate_tunnel_ready_seconds for node.
func readySeconds(t *testing.T, reg *prometheus.Registry, node string) (uint64, float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "shadowgate_tunnel_ready_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node" && l.GetValue() == node {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// The reason label takes only the catalogue's reasons: what is not in it counts as TunnelDown.
func TestTheReasonLabelIsTheCatalogues(t *testing.T) {
	for _, tc := range []struct{ in, want tunnelstate.Reason }{
		{"", ""},
		{tunnelstate.ReasonLoginRefused, tunnelstate.ReasonLoginRefused},
		{tunnelstate.ReasonCredentialMissing, tunnelstate.ReasonCredentialMissing},
		{"Made-up reason\nwith a line", tunnelstate.ReasonTunnelDown},
	} {
		if got := reasonLabel(tc.in); got != tc.want {
			t.Errorf("reasonLabel(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
