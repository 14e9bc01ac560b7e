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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
		Short: "Show the tunnel state of offloaded pods, as shadowgate reports it on them",
		Long: `Show each offloaded pod's tunnel as shadowgate last saw it: the compute node it leads to,
the forward mode, the state (Starting, WaitingForNode, Ready, Failed), the reason, how long
the state has held, and whether the shadow matches the policy in force (SHADOW: Current,
OutOfDate, Rolling, Refused); for one pod, also the last tunnel Event with its remedy. It reads only
the pods of one namespace, their interlink.eu/tunnel-state annotation and their Events, with
your own kubeconfig: nothing in the shadow namespace. A pod whose annotation cannot be read is
shown as Unreadable, with why, and the others as usual. Every text taken from a pod or an Event
is printed with its control characters escaped (\x1b, \u202e).
Exit 0: every tunnel shown is not Failed. Exit 1: at least one is Failed or Unreadable, or the
pod has no tunnel state. Exit 2: bad flags, or the API server cannot be read.`,
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

// unreadable is the STATE or SHADOW of a row whose annotation cannot be read.
const unreadable = "Unreadable"

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
	// Error says why the pod's tunnel-state or shadow-drift annotation cannot be read; the
	// tunnel is null, or the shadow Unreadable, then.
	Error string `json:"error,omitempty"`
	// tunnelUnreadable: the pod has a tunnel-state annotation that cannot be read.
	tunnelUnreadable bool
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
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return usageError("kubeconfig: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	rows, err := tunnels(ctx, cs, ns, pod)
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

// exitFor is exitDenied when a row is Failed, Unreadable, or has no tunnel state.
func exitFor(rows []podTunnel) error {
	for _, r := range rows {
		if r.Tunnel == nil || r.Tunnel.State == tunnelstate.Failed || r.Error != "" {
			return &exitError{code: exitDenied}
		}
	}
	return nil
}

// tunnels reads the pods of ns with a tunnel state, or the one pod named, with its last
// tunnel Event.
func tunnels(ctx context.Context, cs kubernetes.Interface, ns, name string) ([]podTunnel, error) {
	var pods []corev1.Pod
	if name != "" {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pod %s/%s not found", ns, name)
		}
		if err != nil {
			return nil, err
		}
		pods = []corev1.Pod{*p}
	} else {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, p := range list.Items {
			if _, ok := p.Annotations[tunnelstate.AnnotationTunnelState]; ok {
				pods = append(pods, p)
			}
		}
	}
	rows := make([]podTunnel, 0, len(pods))
	for i := range pods {
		rows = append(rows, rowOf(&pods[i]))
	}
	if name != "" {
		last, err := lastTunnelEvent(ctx, cs, &pods[0])
		if err != nil {
			return nil, err
		}
		rows[0].LastEvent = printable.String(last)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, nil
}

// rowOf is the pod's row, printable. Anyone who may update the pod can write its annotations:
// one that cannot be read makes this row Unreadable, with why, and no other.
func rowOf(p *corev1.Pod) podTunnel {
	row := podTunnel{Namespace: p.Namespace, Name: p.Name, Node: printable.String(p.Spec.NodeName)}
	var why []string
	shadow, err := drift.Of(p.Annotations)
	if err != nil {
		why = append(why, err.Error())
		shadow = drift.Status{State: unreadable}
	}
	shadow.Reason = printable.String(shadow.Reason)
	row.Shadow = shadow
	if v, ok := p.Annotations[tunnelstate.AnnotationTunnelState]; ok {
		st, err := tunnelstate.Decode(v)
		if err != nil {
			why = append(why, err.Error())
			row.tunnelUnreadable = true
		} else {
			st.Reason = tunnelstate.Reason(printable.String(string(st.Reason)))
			st.Message, st.Container = printable.String(st.Message), printable.String(st.Container)
			st.ComputeNode, st.ForwardMode, st.Service = printable.String(st.ComputeNode), printable.String(st.ForwardMode), printable.String(st.Service)
			row.Tunnel = &st
		}
	}
	row.Error = printable.String(strings.Join(why, "; "))
	return row
}

// lastTunnelEvent is "<reason>: <message>" of the newest tunnel Event on the pod.
func lastTunnelEvent(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) (string, error) {
	sel := fields.Set{"involvedObject.uid": string(pod.UID)}.AsSelector().String()
	list, err := cs.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
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
		fmt.Fprintln(out, "No pods with a tunnel state in this namespace.")
		return
	}
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "POD\tNODE\tCOMPUTE-NODE\tMODE\tSTATE\tREASON\tAGE\tSHADOW")
	for _, r := range rows {
		st := r.Tunnel
		if r.tunnelUnreadable {
			fmt.Fprintf(w, "%s\t%s\t-\t-\t%s\t%s\t-\t%s\n", r.Name, dash(r.Node), unreadable, oneLine(r.Error, 100), r.Shadow.State)
			continue
		}
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
	if len(rows) == 1 && rows[0].Error != "" {
		fmt.Fprintf(out, "\nUnreadable: %s. shadowgate writes these annotations and never one that reads so: someone else wrote this one.\n", rows[0].Error)
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
