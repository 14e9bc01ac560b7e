package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/printable"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
)

// statusTimeout bounds the whole command: a few reads from the API server.
const statusTimeout = 30 * time.Second

// tunnelEvents are the reasons of the Events the tunnel reporter records on a pod.
var tunnelEvents = map[string]bool{"TunnelWaitingForNode": true, "TunnelReady": true, "TunnelFailed": true, "TunnelRecovered": true, "TunnelEnded": true}

type statusOptions struct {
	kubeconfig, context, namespace, output string
}

func newStatusCommand() *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status [POD]",
		Short: "Show the tunnel state of offloaded pods, as shadowgate reports it in their Tunnels",
		Long: `Show each offloaded pod's tunnel as shadowgate last saw it: the compute node it leads to,
the forward mode, the state (Starting, WaitingForNode, Ready, Failed, Ended), the reason, how
long the state has held, and whether the shadow matches the policy in force (SHADOW: Current,
OutOfDate, Rolling, Refused); for one pod, also the last tunnel Event with its remedy. A
finished pod keeps its last state until it is deleted. It reads only the pods, Tunnels and
Events of one namespace, with your own kubeconfig: nothing in the shadow namespace. Every text
taken from a Tunnel or an Event is printed with its control characters escaped (\x1b, \u202e).
Exit 0: every tunnel shown is not Failed. Exit 1: at least one is Failed, or the pod has no
tunnel state. Exit 2: bad flags, or the API server cannot be read.`,
		Example: "  shadowgate status -n user\n  shadowgate status -n user notebook -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.output != "text" && o.output != "json" {
				return usageError("--output must be text or json, not %q", o.output)
			}
			pod := ""
			if len(args) == 1 {
				pod = args[0]
			}
			return o.run(cmd.OutOrStdout(), pod)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the pods (default: the context's)")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	return cmd
}

// podTunnel is one pod's row. Every text in it is printable (printable.String).
type podTunnel struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	Node      string              `json:"node,omitempty"`
	Tunnel    *tunnelstate.Status `json:"tunnel"` // null: no state reported
	// Shadow is the shadow against the policy in force: Current, OutOfDate, Rolling, Refused.
	Shadow drift.Status `json:"shadow"`
	// LastEvent is the newest tunnel Event on the pod (one pod only).
	LastEvent string `json:"lastEvent,omitempty"`
}

func (o *statusOptions) run(out io.Writer, pod string) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return usageError("kubeconfig: %v", err)
	}
	ns := o.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return usageError("kubeconfig: %v", err)
		}
	}
	cfg.UserAgent = "shadowgate-status/" + version
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme) // registering built-in types into a new scheme cannot fail
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return usageError("kubeconfig: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	rows, err := tunnels(ctx, c, ns, pod)
	if err != nil {
		return usageError("%v", err)
	}
	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"pods": rows}); err != nil {
			return err
		}
	} else {
		printTunnels(out, rows, time.Now())
	}
	return exitFor(rows)
}

// exitFor is exitDenied when a row is Failed or has no tunnel state.
func exitFor(rows []podTunnel) error {
	for _, r := range rows {
		if r.Tunnel == nil || r.Tunnel.State == tunnelstate.Failed {
			return &exitError{code: exitDenied}
		}
	}
	return nil
}

// tunnels reads the pods of ns that have a Tunnel, or the one pod named, with its last tunnel
// Event. A Tunnel is a pod's when the pod owns it: one left by an earlier pod of the same name
// (the garbage collector removes it) is none.
func tunnels(ctx context.Context, c client.Reader, ns, name string) ([]podTunnel, error) {
	var pods []corev1.Pod
	var list v1alpha1.TunnelList
	if name != "" {
		p := corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pod %s/%s not found", ns, name)
		} else if err != nil {
			return nil, err
		}
		pods = []corev1.Pod{p}
		t := v1alpha1.Tunnel{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &t); err == nil {
			list.Items = []v1alpha1.Tunnel{t}
		} else if !apierrors.IsNotFound(err) {
			return nil, tunnelsError(err)
		}
	} else {
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, tunnelsError(err)
		}
		var all corev1.PodList
		if err := c.List(ctx, &all, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		pods = all.Items
	}
	byPod := map[string]*v1alpha1.Tunnel{}
	for i := range list.Items {
		byPod[list.Items[i].Name] = &list.Items[i]
	}
	rows := make([]podTunnel, 0, len(list.Items))
	for i := range pods {
		t := byPod[pods[i].Name]
		if t != nil && !t.IsFor(&pods[i]) {
			t = nil
		}
		if t != nil || name != "" {
			rows = append(rows, rowOf(&pods[i], t))
		}
	}
	if name != "" {
		last, err := lastTunnelEvent(ctx, c, &pods[0])
		if err != nil {
			return nil, err
		}
		rows[0].LastEvent = printable.String(last)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, nil
}

// tunnelsError says what a failed read of Tunnels means: without the resource, shadowgate is
// not installed (or is older than its Tunnels).
func tunnelsError(err error) error {
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return fmt.Errorf("the API server has no Tunnels (%s): shadowgate is not installed in this cluster, or is a version from before them: %w", v1alpha1.GroupVersion, err)
	}
	return err
}

// rowOf is the pod's row, with what its Tunnel holds (nil for none), made printable.
func rowOf(p *corev1.Pod, t *v1alpha1.Tunnel) podTunnel {
	row := podTunnel{Namespace: p.Namespace, Name: p.Name, Node: printable.String(p.Spec.NodeName), Shadow: drift.Status{State: drift.Current}}
	if t == nil {
		return row
	}
	row.Shadow = drift.Of(t.Status.Shadow)
	row.Shadow.State = drift.State(printable.String(string(row.Shadow.State)))
	row.Shadow.Reason = printable.String(row.Shadow.Reason)
	if st, ok := tunnelstate.Of(&t.Status); ok {
		st.State = tunnelstate.State(printable.String(string(st.State)))
		st.Reason = tunnelstate.Reason(printable.String(string(st.Reason)))
		st.Message, st.Container = printable.String(st.Message), printable.String(st.Container)
		st.ComputeNode, st.ForwardMode, st.Service = printable.String(st.ComputeNode), printable.String(st.ForwardMode), printable.String(st.Service)
		row.Tunnel = &st
	}
	return row
}

// lastTunnelEvent is "<reason>: <message>" of the newest tunnel Event on the pod.
func lastTunnelEvent(ctx context.Context, c client.Reader, pod *corev1.Pod) (string, error) {
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(pod.Namespace), client.MatchingFields{"involvedObject.uid": string(pod.UID)}); err != nil {
		return "", err
	}
	var newest *corev1.Event
	var at time.Time
	for i := range list.Items {
		e := &list.Items[i]
		if !tunnelEvents[e.Reason] {
			continue
		}
		t := tunnelstate.EventTime(e)
		if newest == nil || !t.Before(at) {
			newest, at = e, t
		}
	}
	if newest == nil {
		return "", nil
	}
	return newest.Reason + ": " + newest.Message, nil
}

func printTunnels(out io.Writer, rows []podTunnel, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintln(out, "No pods with a Tunnel in this namespace.")
		return
	}
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "POD\tNODE\tCOMPUTE-NODE\tMODE\tSTATE\tREASON\tAGE\tSHADOW")
	for _, r := range rows {
		st := r.Tunnel
		if st == nil {
			fmt.Fprintf(w, "%s\t%s\t-\t-\t-\tno tunnel state reported\t-\t%s\n", r.Name, dash(r.Node), r.Shadow.State)
			continue
		}
		reason := string(st.Reason)
		if st.State == tunnelstate.Failed || st.State == tunnelstate.WaitingForNode {
			reason += ": " + st.Message
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, dash(r.Node), dash(st.ComputeNode), dash(st.ForwardMode),
			st.State, dash(oneLine(reason, 100)), duration.HumanDuration(now.Sub(st.Since)), r.Shadow.State)
	}
	_ = w.Flush()
	if len(rows) == 1 && rows[0].Shadow.State != drift.Current {
		fmt.Fprintf(out, "\nShadow: %s\n", shadowSentence(rows[0].Shadow))
	}
	if len(rows) == 1 && rows[0].LastEvent != "" {
		fmt.Fprintf(out, "\nLast tunnel event: %s\n", rows[0].LastEvent)
	}
	if len(rows) == 1 && rows[0].Tunnel == nil {
		fmt.Fprintln(out, "\nshadowgate has reported no tunnel on this pod: it is on no SSH-shadow virtual node, has nothing to forward, or its shadow has not started yet.")
	}
}

// shadowSentence says what a shadow's drift state means for the pod's owner.
func shadowSentence(s drift.Status) string {
	switch s.State {
	case drift.OutOfDate:
		return "the policy in force renders this pod's shadow differently; it waits for its turn to be rolled (the tunnel breaks briefly then)"
	case drift.Rolling:
		return "the shadow pod is being replaced to follow the policy in force; the tunnel comes back once the new one is ready"
	case drift.Refused:
		return "the policy in force would refuse this pod; it and its shadow are left as they are: " + s.Reason
	}
	return string(s.State)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine is s on one line, printable, cut to max bytes with the "..." that says so.
func oneLine(s string, max int) string {
	return printable.Cut(strings.Join(strings.Fields(s), " "), max-3)
}
