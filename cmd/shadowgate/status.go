package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/internal/drift"
	"github.com/interlink-hq/shadowgate/internal/printable"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
)

// statusTimeout bounds each reading of the API server: the table, or a watch's reading afresh.
const statusTimeout = 30 * time.Second

// tunnelEvents are the reasons of the Events the tunnel reporter records on a pod.
var tunnelEvents = map[string]bool{"TunnelWaitingForNode": true, "TunnelReady": true, "TunnelFailed": true, "TunnelRecovered": true, "TunnelEnded": true}

// tunnelStates are the states --wait-for takes.
var tunnelStates = []tunnelstate.State{tunnelstate.Starting, tunnelstate.WaitingForNode, tunnelstate.Ready, tunnelstate.Failed, tunnelstate.Ended}

type statusOptions struct {
	kubeconfig, context, namespace, output, waitFor string
	allNamespaces, watch                            bool
	timeout                                         time.Duration
	// now is the clock ages are counted by: time.Now, or a test's.
	now func() time.Time
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
Events of one namespace (of every namespace with -A), with your own kubeconfig: nothing in the
shadow namespace. Every text taken from a Tunnel or an Event is printed with its control
characters escaped (\x1b, \u202e).
-w prints the table, then a row for each pod whose Tunnel changes, until interrupted.
--wait-for=STATE waits until the tunnel of the pod named, or of every pod listed at the start,
is in STATE, then prints the table; at --timeout, or on an interrupt, it exits 1 naming the
pods that are not.
Exit 0: every tunnel shown is not Failed; with --wait-for, every one reached the state. Exit 1:
at least one is Failed, or the pod has no tunnel state; with --wait-for, one did not reach the
state in time. Exit 2: bad flags, the API server cannot be read, or it forbids the reading
(-A needs the right to list Tunnels and pods in every namespace).`,
		Example: "  shadowgate status -n user\n  shadowgate status -n user notebook -o json\n" +
			"  shadowgate status -A -o wide\n  shadowgate status -n user notebook --wait-for=Ready --timeout=10m",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pod := ""
			if len(args) == 1 {
				pod = args[0]
			}
			if err := o.validate(pod, cmd.Flags().Changed("timeout")); err != nil {
				return err
			}
			ctx := cmd.Context()
			if o.watch || o.waitFor != "" {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			return o.run(ctx, cmd.OutOrStdout(), pod)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the pods (default: the context's)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "the pods of every namespace, with a NAMESPACE column")
	f.StringVarP(&o.output, "output", "o", "text", "text, wide (adds SERVICE and MESSAGE), json or yaml")
	f.BoolVarP(&o.watch, "watch", "w", false, "after the table, print a row whenever a pod's Tunnel changes, until interrupted")
	f.StringVar(&o.waitFor, "wait-for", "", "wait until every tunnel is in this state: Starting, WaitingForNode, Ready, Failed or Ended")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long --wait-for waits")
	return cmd
}

// validate refuses flags that do not go together, and normalises --wait-for's state.
func (o *statusOptions) validate(pod string, timeoutSet bool) error {
	switch o.output {
	case "text", "wide", "json", "yaml":
	default:
		return usageError("--output must be text, wide, json or yaml, not %q", o.output)
	}
	if o.allNamespaces && pod != "" {
		return usageError("-A lists every namespace's pods, so it takes no pod name (%q): name the pod's namespace with -n instead", pod)
	}
	if o.allNamespaces && o.namespace != "" {
		return usageError("-A and -n %q both say which namespace to read: give one", o.namespace)
	}
	if o.waitFor != "" {
		i := slices.IndexFunc(tunnelStates, func(s tunnelstate.State) bool { return strings.EqualFold(string(s), o.waitFor) })
		if i < 0 {
			return usageError("--wait-for %q is no tunnel state: give one of %v", o.waitFor, tunnelStates)
		}
		o.waitFor = string(tunnelStates[i])
	}
	if timeoutSet && o.waitFor == "" {
		return usageError("--timeout bounds --wait-for, and --wait-for is not given")
	}
	if o.timeout <= 0 {
		return usageError("--timeout must be positive, not %s", o.timeout)
	}
	return nil
}

// podTunnel is one pod's row. Every text in it is printable (printable.String).
type podTunnel struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	Node      string              `json:"node,omitempty"`
	Tunnel    *tunnelstate.Status `json:"tunnel"` // null: no state reported
	// Shadow is the shadow against the policy in force: Current, OutOfDate, Rolling, Refused.
	Shadow drift.Status `json:"shadow"`
	// LastEvent is the newest tunnel Event on the pod (one pod only, not in a watch's rows).
	LastEvent string `json:"lastEvent,omitempty"`
	// Deleted says the pod is gone (a watch's row).
	Deleted bool `json:"deleted,omitempty"`
}

func (r podTunnel) key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
}

// sameAs says whether r shows what o shows, the last tunnel Event aside.
func (r podTunnel) sameAs(o podTunnel) bool {
	r.LastEvent, o.LastEvent = "", ""
	return reflect.DeepEqual(r, o)
}

func (o *statusOptions) run(ctx context.Context, out io.Writer, pod string) error {
	cfg, cc, err := loadKubeconfig(o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	ns := o.namespace
	if ns == "" && !o.allNamespaces {
		if ns, _, err = cc.Namespace(); err != nil {
			return usageError("kubeconfig: %v", err)
		}
	}
	cfg.UserAgent = "shadowgate-status/" + version
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme) // registering built-in types into a new scheme cannot fail
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return usageError("kubeconfig: %v", err)
	}
	return o.show(ctx, out, c, ns, pod)
}

// loadKubeconfig reads the kubeconfig file (or the default ones, or the pod's own account in a
// cluster) with the context given, refusing an unreadable one as a usage error.
func loadKubeconfig(file, context string) (*rest.Config, clientcmd.ClientConfig, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = file
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, usageError("kubeconfig: %v", err)
	}
	return cfg, cc, nil
}

// show prints the rows of the pods of ns ("" for every namespace), or of the pod named, then
// follows them with -w or --wait-for, until ctx ends.
func (o *statusOptions) show(ctx context.Context, out io.Writer, c client.WithWatch, ns, pod string) error {
	now := o.now
	if now == nil {
		now = time.Now
	}
	p := &printer{out: out, output: o.output, now: now, table: table{allNamespaces: ns == "", wide: o.output == "wide"}}
	if o.waitFor != "" {
		return o.wait(ctx, p, c, ns, pod)
	}
	if !o.watch {
		rctx, cancel := context.WithTimeout(ctx, statusTimeout)
		defer cancel()
		rows, err := tunnels(rctx, c, ns, pod)
		if err != nil {
			return usageError("%v", err)
		}
		if err := p.all(rows); err != nil {
			return err
		}
		return exitFor(rows)
	}
	seen := map[types.NamespacedName]podTunnel{}
	first := func(rows []podTunnel) (bool, error) { return false, p.all(rows) }
	if err := follow(ctx, c, ns, pod, seen, first, func(r podTunnel) (bool, error) { return false, p.one(r) }); err != nil {
		return err
	}
	return exitFor(slices.Collect(maps.Values(seen)))
}

// wait follows the rows until every pod listed at the start (or the one named) has its tunnel
// in o.waitFor, printing them as they change with -w, and the table at the end without.
func (o *statusOptions) wait(ctx context.Context, p *printer, c client.WithWatch, ns, pod string) error {
	want := tunnelstate.State(o.waitFor)
	waitCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	seen := map[types.NamespacedName]podTunnel{}
	var targets []types.NamespacedName
	reached := func() bool {
		for _, k := range targets {
			if r := seen[k]; r.Deleted || r.Tunnel == nil || r.Tunnel.State != want {
				return false
			}
		}
		return len(targets) > 0
	}
	first := func(rows []podTunnel) (bool, error) {
		if len(rows) == 0 {
			scope := "in namespace " + ns
			if ns == "" {
				scope = "in any namespace"
			}
			return false, usageError("there are no pods with a Tunnel %s, so none to wait for: name the pod to wait for its tunnel", scope)
		}
		for _, r := range rows {
			targets = append(targets, r.key())
		}
		if o.watch {
			if err := p.all(rows); err != nil {
				return false, err
			}
		}
		return reached(), nil
	}
	changed := func(r podTunnel) (bool, error) {
		if o.watch {
			if err := p.one(r); err != nil {
				return false, err
			}
		}
		return reached(), nil
	}
	if err := follow(waitCtx, c, ns, pod, seen, first, changed); err != nil {
		return err
	}
	rows := make([]podTunnel, 0, len(targets))
	for _, k := range targets {
		rows = append(rows, seen[k])
	}
	if !o.watch {
		if err := p.all(rows); err != nil {
			return err
		}
	}
	if reached() {
		return nil
	}
	why := fmt.Sprintf("timed out after %s", o.timeout)
	if ctx.Err() != nil {
		why = "interrupted"
	}
	if len(targets) == 0 {
		return &exitError{code: exitDenied, msg: why + " before the pods could be read"}
	}
	var not []string
	for _, r := range rows {
		switch {
		case r.Deleted:
			not = append(not, r.Namespace+"/"+r.Name+" was deleted")
		case r.Tunnel == nil:
			not = append(not, r.Namespace+"/"+r.Name+" has no tunnel state")
		case r.Tunnel.State != want:
			not = append(not, fmt.Sprintf("%s/%s is %s (%s)", r.Namespace, r.Name, r.Tunnel.State, dash(string(r.Tunnel.Reason))))
		}
	}
	return &exitError{code: exitDenied, msg: fmt.Sprintf("%s waiting for tunnels %s: %s", why, want, strings.Join(not, "; "))}
}

// follow keeps seen, the rows of the pods of ns ("" for every namespace) or of the pod named,
// current from a watch on their Tunnels, until ctx ends (nil) or changed says done. It passes
// the rows read at the start to first, then to changed each row that differs from the one in
// seen. A watch the API server ends (its timeout, an expired version) is made again, and the
// Tunnels read afresh once it is: no change made meanwhile is lost.
func follow(ctx context.Context, c client.WithWatch, ns, pod string, seen map[types.NamespacedName]podTunnel,
	first func([]podTunnel) (bool, error), changed func(podTunnel) (bool, error)) error {
	opts := []client.ListOption{client.InNamespace(ns)}
	if pod != "" {
		opts = append(opts, client.MatchingFields{"metadata.name": pod})
	}
	update := func(r podTunnel) (bool, error) {
		if old, ok := seen[r.key()]; (ok && old.sameAs(r)) || (!ok && r.Deleted) {
			return false, nil
		}
		seen[r.key()] = r
		return changed(r)
	}
	for started := false; ; started = true {
		w, err := c.Watch(ctx, &v1alpha1.TunnelList{}, opts...)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return usageError("%v", tunnelsError(err, ns))
		}
		done, err := func() (bool, error) {
			defer w.Stop()
			rctx, cancel := context.WithTimeout(ctx, statusTimeout)
			rows, err := tunnels(rctx, c, ns, pod)
			cancel()
			switch {
			case started && pod != "" && apierrors.IsNotFound(err):
				rows = nil // the pod named is gone: resync says so
			case err != nil:
				return false, usageError("%v", err)
			}
			if !started {
				for _, r := range rows {
					seen[r.key()] = r
				}
				if done, err := first(rows); done || err != nil {
					return done, err
				}
			} else if done, err := resync(rows, seen, update); done || err != nil {
				return done, err
			}
			for {
				select {
				case <-ctx.Done():
					return false, nil
				case ev, open := <-w.ResultChan():
					if !open || ev.Type == watch.Error {
						return false, nil
					}
					t, ok := ev.Object.(*v1alpha1.Tunnel)
					if !ok || (pod != "" && t.Name != pod) {
						continue
					}
					r, ok, err := rowFor(ctx, c, t, ev.Type == watch.Deleted)
					if err != nil {
						return false, usageError("%v", err)
					}
					if !ok {
						continue
					}
					if done, err := update(r); done || err != nil {
						return done, err
					}
				}
			}
		}()
		if ctx.Err() != nil {
			return nil
		}
		if done || err != nil {
			return err
		}
		select { // a moment between watches, so a server that ends each at once is not hammered
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// resync passes to update the rows read afresh, and a deleted row for each pod seen that they
// no longer hold.
func resync(rows []podTunnel, seen map[types.NamespacedName]podTunnel, update func(podTunnel) (bool, error)) (bool, error) {
	now := map[types.NamespacedName]bool{}
	for _, r := range rows {
		now[r.key()] = true
		if done, err := update(r); done || err != nil {
			return done, err
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(seen), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
		if !now[k] {
			if done, err := update(podTunnel{Namespace: k.Namespace, Name: k.Name, Deleted: true}); done || err != nil {
				return done, err
			}
		}
	}
	return false, nil
}

// rowFor is the row a watched Tunnel gives its pod, deleted when the pod is gone; false when the
// Tunnel is not the pod's (an earlier pod's of the same name).
func rowFor(ctx context.Context, c client.Reader, t *v1alpha1.Tunnel, deleted bool) (podTunnel, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	var p corev1.Pod
	err := c.Get(ctx, client.ObjectKeyFromObject(t), &p)
	switch {
	case apierrors.IsNotFound(err):
		return podTunnel{Namespace: t.Namespace, Name: t.Name, Deleted: true}, true, nil
	case err != nil:
		return podTunnel{}, false, err
	case !t.IsFor(&p):
		return podTunnel{}, false, nil
	case deleted:
		return rowOf(&p, nil), true, nil
	}
	return rowOf(&p, t), true, nil
}

// exitFor is exitDenied when a row is Failed or has no tunnel state; a deleted pod's counts
// for nothing.
func exitFor(rows []podTunnel) error {
	for _, r := range rows {
		if !r.Deleted && (r.Tunnel == nil || r.Tunnel.State == tunnelstate.Failed) {
			return &exitError{code: exitDenied}
		}
	}
	return nil
}

// tunnels reads the pods of ns ("" for every namespace) that have a Tunnel, or the one pod
// named, with its last tunnel Event. A Tunnel is a pod's when the pod owns it: one left by an
// earlier pod of the same name (the garbage collector removes it) is none.
func tunnels(ctx context.Context, c client.Reader, ns, name string) ([]podTunnel, error) {
	var pods []corev1.Pod
	var list v1alpha1.TunnelList
	if name != "" {
		p := corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no pod %s in namespace %s: %w", name, ns, err)
		} else if err != nil {
			return nil, err
		}
		pods = []corev1.Pod{p}
		t := v1alpha1.Tunnel{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &t); err == nil {
			list.Items = []v1alpha1.Tunnel{t}
		} else if !apierrors.IsNotFound(err) {
			return nil, tunnelsError(err, ns)
		}
	} else {
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, tunnelsError(err, ns)
		}
		// Across namespaces, only those that have a Tunnel have pods to read.
		namespaces := map[string]bool{ns: true}
		if ns == "" {
			namespaces = map[string]bool{}
			for _, t := range list.Items {
				namespaces[t.Namespace] = true
			}
		}
		for _, n := range slices.Sorted(maps.Keys(namespaces)) {
			var all corev1.PodList
			if err := c.List(ctx, &all, client.InNamespace(n)); err != nil {
				return nil, scopeError(err, ns)
			}
			pods = append(pods, all.Items...)
		}
	}
	byPod := map[types.NamespacedName]*v1alpha1.Tunnel{}
	for i := range list.Items {
		byPod[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
	rows := make([]podTunnel, 0, len(list.Items))
	for i := range pods {
		t := byPod[client.ObjectKeyFromObject(&pods[i])]
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
	slices.SortFunc(rows, func(a, b podTunnel) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return rows, nil
}

// tunnelsError says what a failed read of Tunnels in ns means: without the resource, shadowgate
// is not installed (or is older than its Tunnels).
func tunnelsError(err error, ns string) error {
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return fmt.Errorf("the API server has no Tunnels (%s): shadowgate is not installed in this cluster, or is a version from before them: %w", v1alpha1.GroupVersion, err)
	}
	return scopeError(err, ns)
}

// scopeError says what a read the API server forbids across namespaces (ns "", -A) means.
func scopeError(err error, ns string) error {
	if ns == "" && apierrors.IsForbidden(err) {
		return fmt.Errorf("-A reads the Tunnels and pods of every namespace, and the API server forbids you that: %w; name a namespace you may read with -n instead of -A", err)
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
		st.WaitReason, st.ExpectedStart = printable.String(st.WaitReason), printable.String(st.ExpectedStart)
		st.URLs = slices.Clone(st.URLs)
		for i, u := range st.URLs {
			st.URLs[i] = printable.String(u)
		}
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

// printer prints rows as -o says: a table (wide: SERVICE and MESSAGE added), or a JSON or YAML
// document {"pods": [...]} each time.
type printer struct {
	out    io.Writer
	output string
	now    func() time.Time
	table  table
	docs   int // documents printed, each after the first separated by --- in YAML
}

// all prints every row, with the table's header and notes.
func (p *printer) all(rows []podTunnel) error {
	if p.output == "json" || p.output == "yaml" {
		return p.doc(rows)
	}
	p.table.print(p.out, rows, p.now())
	return nil
}

// one prints a row that changed: a table row without the header, or a document of it alone.
func (p *printer) one(r podTunnel) error {
	if p.output == "json" || p.output == "yaml" {
		return p.doc([]podTunnel{r})
	}
	w := tabwriter.NewWriter(p.out, 0, 8, 3, ' ', 0)
	p.table.row(w, r, p.now())
	return w.Flush()
}

func (p *printer) doc(rows []podTunnel) error {
	v := map[string]any{"pods": rows}
	if p.output == "json" {
		enc := json.NewEncoder(p.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	if p.docs > 0 {
		b = append([]byte("---\n"), b...)
	}
	p.docs++
	_, err = p.out.Write(b)
	return err
}

// table is status's table: NAMESPACE first with -A, URL (the front door's, one per port) after
// SHADOW, SERVICE and MESSAGE last with -o wide.
type table struct {
	allNamespaces, wide bool
}

func (t table) print(out io.Writer, rows []podTunnel, now time.Time) {
	if len(rows) == 0 {
		if t.allNamespaces {
			fmt.Fprintln(out, "No pods with a Tunnel in any namespace.")
		} else {
			fmt.Fprintln(out, "No pods with a Tunnel in this namespace.")
		}
		return
	}
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	cols := []string{"POD", "NODE", "COMPUTE-NODE", "MODE", "STATE", "REASON", "AGE", "SHADOW", "URL"}
	if t.allNamespaces {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	if t.wide {
		cols = append(cols, "SERVICE", "MESSAGE")
	}
	fmt.Fprintln(w, strings.Join(cols, "\t"))
	for _, r := range rows {
		t.row(w, r, now)
	}
	_ = w.Flush()
	if len(rows) == 1 && rows[0].Shadow.State != drift.Current {
		fmt.Fprintf(out, "\nShadow: %s\n", shadowSentence(rows[0].Shadow))
	}
	if len(rows) == 1 && rows[0].LastEvent != "" {
		fmt.Fprintf(out, "\nLast tunnel event: %s\n", rows[0].LastEvent)
	}
	if len(rows) == 1 && rows[0].Tunnel == nil && !rows[0].Deleted {
		fmt.Fprintln(out, "\nshadowgate has reported no tunnel on this pod: it is on no SSH-shadow virtual node, has nothing to forward, or its shadow has not started yet.")
	}
}

// row writes r's line to w.
func (t table) row(w io.Writer, r podTunnel, now time.Time) {
	var cols []string
	if t.allNamespaces {
		cols = append(cols, r.Namespace)
	}
	st := r.Tunnel
	switch {
	case r.Deleted:
		cols = append(cols, r.Name, "-", "-", "-", "-", "pod deleted", "-", "-", "-")
	case st == nil:
		cols = append(cols, r.Name, dash(r.Node), "-", "-", "-", "no tunnel state reported", "-", string(r.Shadow.State), "-")
	default:
		reason := string(st.Reason)
		switch {
		case st.State == tunnelstate.WaitingForNode && st.WaitReason != "":
			reason += fmt.Sprintf(" (Slurm: %s, expected start %s)", st.WaitReason, st.ExpectedStart)
		case !t.wide && (st.State == tunnelstate.Failed || st.State == tunnelstate.WaitingForNode):
			reason += ": " + st.Message
		}
		cols = append(cols, r.Name, dash(r.Node), dash(st.ComputeNode), dash(st.ForwardMode), string(st.State),
			dash(oneLine(reason, 100)), duration.HumanDuration(now.Sub(st.Since)), string(r.Shadow.State), dash(strings.Join(st.URLs, ",")))
	}
	if t.wide {
		if st == nil || r.Deleted {
			cols = append(cols, "-", "-")
		} else {
			cols = append(cols, dash(st.Service), dash(oneLine(st.Message, 200)))
		}
	}
	fmt.Fprintln(w, strings.Join(cols, "\t"))
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
