package tunnels

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/eventnote"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/internal/printable"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Event reasons of the tunnel reporter, recorded on the offloaded pod.
const (
	ReasonTunnelWaitingForNode = "TunnelWaitingForNode"
	ReasonTunnelReady          = "TunnelReady"
	ReasonTunnelFailed         = "TunnelFailed"
	ReasonTunnelRecovered      = "TunnelRecovered"
	ReasonTunnelEnded          = "TunnelEnded"
)

// tunnelFieldManager writes the tunnel's fields of a pod's Tunnel status, and nothing else.
const tunnelFieldManager = "shadowgate-tunnel-state"

// tunnelResync is how often a tunnel that is not Ready is looked at again: a readiness probe
// that keeps failing for a new reason changes no pod status, only its Events.
const tunnelResync = 10 * time.Second

// waitEventsRefresh is how long the wait-reason sidecar's Events last read stand for a shadow
// pod waiting for its compute node whose sidecar is ready and unchanged.
const waitEventsRefresh = 5 * time.Minute

// maxShadowEvents bounds the Events read for one shadow pod: the kubelet's correlator folds
// repeats of a probe failure into one Event, so a pod has few.
const maxShadowEvents = 200

// TunnelReporter is the reporter of the package doc.
type TunnelReporter struct {
	cache    client.Client // the manager's: pods, shadow Deployments, Services, ConfigMaps
	reader   client.Reader // uncached: Events and credentials, read only when needed
	identity shadows.Identity
	writer   client.Client // the Tunnels' writes
	policies policystore.Policies
	recorder events.EventRecorder
	metrics  *metrics.Metrics
	now      func() time.Time

	mu     sync.Mutex
	states map[types.NamespacedName]series // for the shadowgate_tunnels gauge
	tally  map[series]int                  // tunnels per series of the gauge, made on first use
	// written is the state this process last wrote for each pod, with the pod's UID: the
	// cache may not hold the Tunnel's new status yet when the next change comes, and reading
	// the one before would record its Event again.
	written map[types.NamespacedName]writtenState
	// waited is, for each pod whose shadow pod waits for its compute node, what was last read
	// of the wait-reason sidecar's Events (waitEvents).
	waited map[types.NamespacedName]waitRead
}

// waitRead is what was last read of a shadow pod's wait-reason Events, with the sidecar's mark
// (tunnelstate.WaitReasonMark) then.
type waitRead struct {
	shadow types.UID
	mark   string
	at     time.Time
	events []corev1.Event
}

var _ reconcile.Reconciler = (*TunnelReporter)(nil)

type writtenState struct {
	uid    types.UID
	status tunnelstate.Status
	// said is the last Event recorded on the pod, its reason and note: a tunnel that dips
	// from Ready to Starting while a probe re-checks it and comes back as it was (a real
	// kubelet runs the readiness probe while the shadow rebuilds in place) is not said Ready
	// again.
	said string
	// ready is whether the tunnel has been Ready since this process first wrote its state:
	// shadowgate_tunnel_ready_seconds observes the first time only.
	ready bool
}

// series is a tunnel's labels in the shadowgate_tunnels gauge.
type series struct {
	node   string
	state  tunnelstate.State
	reason tunnelstate.Reason
}

// New is the reporter of a serving manager.
func New(mgr manager.Manager, identity shadows.Identity, writer client.Client, policies policystore.Policies, recorder events.EventRecorder, metrics *metrics.Metrics) *TunnelReporter {
	return &TunnelReporter{
		cache: mgr.GetClient(), reader: mgr.GetAPIReader(), identity: identity, writer: writer,
		policies: policies, recorder: recorder, metrics: metrics, now: time.Now,
		states:  map[types.NamespacedName]series{},
		written: map[types.NamespacedName]writtenState{},
		waited:  map[types.NamespacedName]waitRead{},
	}
}

// SetupWithManager starts the reporter on the leader, queued by offloaded pod: a shadow pod's
// change queues the pod it stands for (by its annotation, checked against the pod in
// Reconcile), an offloaded pod's creation, finishing and deletion queue itself, and a Tunnel's
// deletion queues the pod of its name, whose Tunnel is made again.
func (t *TunnelReporter) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named("tunnels").
		Watches(&v1alpha1.Tunnel{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Watches(&corev1.Pod{},
			handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
				if shadows.IsShadowPod(o) {
					ns, name, ok := shadows.SplitKey(o.GetAnnotations()[inject.AnnotationShadowFor])
					if !ok {
						return nil
					}
					return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
				}
				return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
			}),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(e event.CreateEvent) bool {
					return shadows.IsShadowPod(e.Object) || shadows.MayHaveShadow(e.Object, shadows.AnyNode)
				},
				// Of an offloaded pod's own updates only its finishing matters; its shadow pod's
				// are what the state is read from.
				UpdateFunc: func(e event.UpdateEvent) bool {
					return shadows.IsShadowPod(e.ObjectNew) || shadows.PhaseEnded(e.ObjectOld, e.ObjectNew)
				},
				DeleteFunc: func(e event.DeleteEvent) bool {
					return shadows.IsShadowPod(e.Object) || shadows.MayHaveShadow(e.Object, shadows.AnyNode)
				},
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).Complete(t)
}

// Reconcile implements reconcile.Reconciler for the offloaded pod req names.
func (t *TunnelReporter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := t.cache.Get(ctx, req.NamespacedName, pod); apierrors.IsNotFound(err) {
		t.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if shadows.IsShadowPod(pod) || pod.DeletionTimestamp != nil {
		t.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	tunnel, err := applier.CachedTunnel(ctx, t.cache, pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	prev, hadPrev := t.previousState(pod, tunnel)
	// A Tunnel deleted (or never seen by the cache yet) is written again, whatever was said.
	missing := tunnel == nil || !tunnel.IsFor(pod)
	if shadows.Finished(pod) {
		// The reconciler removes the shadow; what the tunnel came to is said once, on a pod
		// that had one, and kept in its Tunnel.
		t.forget(req.NamespacedName)
		if !hadPrev {
			return reconcile.Result{}, nil
		}
		if prev.State == tunnelstate.Ended || (prev.State == tunnelstate.Failed && prev.Reason == tunnelstate.ReasonNoRunningJob) {
			if missing {
				return reconcile.Result{}, t.writeState(ctx, pod, tunnel, prev)
			}
			return reconcile.Result{}, nil
		}
		next := tunnelstate.Finished(pod, prev)
		next.Since = t.now().UTC().Truncate(time.Second)
		if err := t.writeState(ctx, pod, tunnel, next); err != nil {
			return reconcile.Result{}, err
		}
		t.transition(pod, prev, hadPrev, next)
		t.record(pod, &shadowView{service: prev.Service, ports: prev.Ports, urls: prev.URLs}, prev, hadPrev, next)
		return reconcile.Result{}, nil
	}
	sh, err := t.shadowOf(ctx, pod)
	if err != nil || sh == nil {
		t.forget(req.NamespacedName)
		return reconcile.Result{}, err
	}
	obs := tunnelstate.Observation{Pod: sh.pod, NodeConfigMap: sh.computeNode, Now: t.now()}
	if sh.pod != nil {
		if obs.Events, err = t.shadowEvents(ctx, req.NamespacedName, sh.pod); err != nil {
			return reconcile.Result{}, err
		}
		if tunnelstate.WaitsForVolumes(sh.pod) {
			if obs.MissingCredentials, err = t.missingCredentials(ctx, sh.pod, obs.Events); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	next := tunnelstate.Observe(obs)
	next.ForwardMode, next.Ports, next.Service, next.URLs = sh.forwardMode, sh.ports, sh.service, sh.urls
	next.Since = obs.Now.UTC().Truncate(time.Second)
	if hadPrev && !prev.Changed(next) {
		next.Since = prev.Since
	}
	t.count(req.NamespacedName, series{node: t.nodeLabel(pod), state: next.State, reason: reasonLabel(next.Reason)})
	// A new message alone is written only where it says something: a probe's message can
	// change on every check.
	informative := next.State == tunnelstate.Failed || next.State == tunnelstate.WaitingForNode
	if !hadPrev || missing || prev.Changed(next) || (informative && prev.Message != next.Message) || prev.Service != next.Service || !slices.Equal(prev.URLs, next.URLs) {
		if err := t.writeState(ctx, pod, tunnel, next); err != nil {
			return reconcile.Result{}, err
		}
		t.transition(pod, prev, hadPrev, next)
		if !hadPrev || prev.Changed(next) {
			t.record(pod, sh, prev, hadPrev, next)
		}
	}
	if next.State == tunnelstate.Ready {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: tunnelResync}, nil
}

// shadowView is what the reporter reads of one pod's shadow.
type shadowView struct {
	deployment  *appsv1.Deployment
	pod         *corev1.Pod // newest live shadow pod, nil while there is none
	computeNode string
	service     string
	ports       []int32
	urls        []string // the front door's, in the order of ports
	forwardMode string
	context     tunnelstate.Context
}

// shadowOf finds the pod's shadow in the cache: its Deployment (nil when the pod has no
// shadow), the Deployment's newest live pod, the Service and the node ConfigMap.
func (t *TunnelReporter) shadowOf(ctx context.Context, pod *corev1.Pod) (*shadowView, error) {
	key := pod.Namespace + "/" + pod.Name
	objs, err := t.identity.Objects(ctx, key)
	if err != nil {
		return nil, err
	}
	sh := &shadowView{}
	var fronts []client.Object // the shadow's Ingress or HTTPRoutes
	for _, obj := range objs {
		if types.UID(obj.GetLabels()[inject.LabelPodUID]) != pod.UID {
			continue
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			sh.deployment = o
		case *corev1.Service:
			sh.service = o.Namespace + "/" + o.Name
			for _, p := range o.Spec.Ports {
				sh.ports = append(sh.ports, p.Port)
			}
		case *corev1.ConfigMap:
			if o.Labels[validate.LabelShadowRole] == validate.ShadowRoleNode {
				sh.computeNode = strings.TrimSpace(o.Data[validate.ComputeNodeKey])
			}
		case *networkingv1.Ingress, *gatewayv1.HTTPRoute:
			fronts = append(fronts, o)
		}
	}
	if sh.deployment == nil {
		return nil, nil
	}
	d := sh.deployment
	pol := t.policies.Current()
	if node, ok := validate.VirtualNodeFor(&pod.Spec, pol); ok {
		network := pol.VirtualNodes[node].Network
		sh.forwardMode = network.SSH.ForwardMode
		sh.context = tunnelstate.Context{Node: node, SSH: network.SSH}
		sh.urls = frontDoorURLs(pod, &network, sh.ports, fronts)
	}
	sh.context.ShadowNamespace, sh.context.Shadow, sh.context.Ports = d.Namespace, d.Name, sh.ports
	pods, err := shadows.Pods(ctx, t.cache, d, pod)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if sh.pod == nil || p.CreationTimestamp.After(sh.pod.CreationTimestamp.Time) {
			sh.pod = p
		}
	}
	return sh, nil
}

// shadowEvents lists the Events on the shadow pod, read only when it waits for its volumes or
// its compute node, or one of its containers runs without being ready: the kubelet says why
// (and wait-reason's probe what Slurm says of the queued job) in Events alone. While the pod
// only waits for its compute node, they are read again (waitEvents) only once there can be
// something new.
func (t *TunnelReporter) shadowEvents(ctx context.Context, key types.NamespacedName, shadow *corev1.Pod) ([]corev1.Event, error) {
	waits := tunnelstate.WaitsForNode(shadow)
	if !waits {
		t.mu.Lock()
		delete(t.waited, key)
		t.mu.Unlock()
	}
	switch {
	case tunnelstate.WaitsForVolumes(shadow) || slices.ContainsFunc(shadow.Status.ContainerStatuses, func(cs corev1.ContainerStatus) bool {
		return cs.State.Running != nil && !cs.Ready
	}):
		return t.listEvents(ctx, shadow)
	case waits:
		return t.waitEvents(ctx, key, shadow)
	}
	return nil, nil
}

// waitEvents are the wait-reason sidecar's Events of a shadow pod waiting for its compute node:
// those last read while the sidecar is ready with the mark it had then (its probe passes, so
// nothing new was printed) and they are younger than waitEventsRefresh; else read again. A
// sidecar not ready has just printed something, which the kubelet's Event may not have carried
// to the API server yet: it is read at every look until the sidecar is ready again, which
// changes its mark once more. A restart of shadowgate reads once.
func (t *TunnelReporter) waitEvents(ctx context.Context, key types.NamespacedName, shadow *corev1.Pod) ([]corev1.Event, error) {
	mark, ready := tunnelstate.WaitReasonMark(shadow)
	now := t.now()
	t.mu.Lock()
	last, ok := t.waited[key]
	t.mu.Unlock()
	if ok && ready && last.shadow == shadow.UID && last.mark == mark && now.Sub(last.at) < waitEventsRefresh {
		return last.events, nil
	}
	evs, err := t.listEvents(ctx, shadow)
	if err != nil {
		return nil, err
	}
	evs = tunnelstate.WaitReasonEvents(evs)
	t.mu.Lock()
	t.waited[key] = waitRead{shadow: shadow.UID, mark: mark, at: now, events: evs}
	t.mu.Unlock()
	return evs, nil
}

// listEvents lists the Events on the shadow pod from the API server.
func (t *TunnelReporter) listEvents(ctx context.Context, shadow *corev1.Pod) ([]corev1.Event, error) {
	list := &corev1.EventList{}
	err := t.reader.List(ctx, list, client.InNamespace(shadow.Namespace), client.Limit(maxShadowEvents),
		client.MatchingFields{"involvedObject.uid": string(shadow.UID)})
	return list.Items, err
}

// missingCredentials names the Secrets and ConfigMaps the shadow pod mounts that its
// namespace does not hold. It asks the API server for each, where shadowgate may read it;
// where it may not (no Secret access without credential replication) it goes by what the
// kubelet said when the mount failed.
func (t *TunnelReporter) missingCredentials(ctx context.Context, shadow *corev1.Pod, evs []corev1.Event) ([]string, error) {
	var missing []string
	for _, mounted := range shadows.MountedCredentials(&shadow.Spec) {
		kind, name, _ := strings.Cut(mounted, "/")
		obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
		err := t.reader.Get(ctx, types.NamespacedName{Namespace: shadow.Namespace, Name: name}, obj)
		switch {
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err) && tunnelstate.MountFailed(evs, kind, name):
			missing = append(missing, kind+" "+name)
		case err != nil && !apierrors.IsForbidden(err):
			return nil, err
		}
	}
	return missing, nil
}

// previousState is the state last reported for the pod: what this process wrote, else (a
// restart, a new leader) what the pod's Tunnel holds.
func (t *TunnelReporter) previousState(pod *corev1.Pod, tunnel *v1alpha1.Tunnel) (tunnelstate.Status, bool) {
	t.mu.Lock()
	w, ok := t.written[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
	t.mu.Unlock()
	if ok && w.uid == pod.UID {
		return w.status, true
	}
	if tunnel == nil {
		return tunnelstate.Status{}, false
	}
	return tunnelstate.Of(&tunnel.Status) // an earlier pod's holds none
}

// writeState writes st as the tunnel's fields of the pod's Tunnel (applier.ApplyTunnelStatus).
func (t *TunnelReporter) writeState(ctx context.Context, pod *corev1.Pod, tunnel *v1alpha1.Tunnel, st tunnelstate.Status) error {
	var status v1alpha1.TunnelStatus
	st.Into(&status)
	written, err := applier.ApplyTunnelStatus(ctx, t.writer, pod, tunnel, tunnelFieldManager, status)
	if written {
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		t.mu.Lock()
		w := t.written[key]
		if w.uid != pod.UID {
			w = writtenState{uid: pod.UID}
		}
		w.status = st
		t.written[key] = w
		t.mu.Unlock()
	}
	return err
}

// say records the Event on pod and remembers it; with unlessSaid, not when it is the one this
// process last recorded there. The note is made printable and cut to an Event's bound: it
// carries what the shadow's containers said.
func (t *TunnelReporter) say(pod *corev1.Pod, related runtime.Object, eventtype, reason, note string, unlessSaid bool) {
	note = eventnote.Truncate(printable.String(note))
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	t.mu.Lock()
	w, ok := t.written[key]
	again := unlessSaid && ok && w.uid == pod.UID && w.said == reason+"\x00"+note
	if ok && w.uid == pod.UID {
		w.said = reason + "\x00" + note
		t.written[key] = w
	}
	t.mu.Unlock()
	if !again {
		t.recorder.Eventf(pod, related, eventtype, reason, "Observe", "%s", note)
	}
}

// record says the change on the pod, in the guide's voice.
func (t *TunnelReporter) record(pod *corev1.Pod, sh *shadowView, prev tunnelstate.Status, hadPrev bool, next tunnelstate.Status) {
	switch next.State {
	case tunnelstate.WaitingForNode:
		t.say(pod, related(sh.pod), corev1.EventTypeNormal, ReasonTunnelWaitingForNode,
			"Waiting for the compute node: "+next.Message+". This is normal while the job is queued; the tunnel opens once it runs.", false)
	case tunnelstate.Ready:
		reason, note := ReasonTunnelReady, "Tunnel ready: "+reach(sh, next)
		if hadPrev && prev.State == tunnelstate.Failed {
			reason, note = ReasonTunnelRecovered, fmt.Sprintf("Tunnel recovered from %s: %s", prev.Reason, reach(sh, next))
		}
		// Back from a check that found nothing wrong: said already, unless something else
		// was said meanwhile.
		t.say(pod, related(sh.pod), corev1.EventTypeNormal, reason, note, hadPrev && prev.State == tunnelstate.Starting)
	case tunnelstate.Failed:
		note := fmt.Sprintf("%s: %s.", next.Reason, strings.TrimSuffix(next.Message, "."))
		if remedy := tunnelstate.Remedy(next.Reason, sh.context); remedy != "" {
			note += " " + remedy
		}
		t.say(pod, related(sh.pod), corev1.EventTypeWarning, ReasonTunnelFailed, note, false)
	case tunnelstate.Ended:
		// Slurm said the job completed, or the pod succeeded: the tunnel closed as it should.
		// Said once: a pod that finishes after Slurm said so says nothing more (Reconcile).
		if next.Reason == tunnelstate.ReasonJobCompleted {
			t.say(pod, related(sh.pod), corev1.EventTypeNormal, ReasonTunnelEnded,
				fmt.Sprintf("Tunnel ended: %s.", strings.TrimSuffix(next.Message, ".")), false)
		}
	}
}

// related is the shadow pod an Event names beside the offloaded pod, when there is one: a
// nil *Pod in the interface would not read as none.
func related(shadow *corev1.Pod) runtime.Object {
	if shadow == nil {
		return nil
	}
	return shadow
}

// frontDoorURLs are the URLs of the ports, in their order, that a front-door object of the
// shadow (fronts) publishes at the pod's host. Each URL is derived from the pod and the policy,
// never read from the object: under interlink.eu/shadow-same-ns that object is in the pod's
// namespace, where its author may edit its hosts. A port counts only where the object's host
// for it is that derived host, so after WildcardDNS changes no URL under the new domain is
// reported while the shadow still serves the old one.
func frontDoorURLs(pod *corev1.Pod, network *policy.Network, ports []int32, fronts []client.Object) []string {
	if !network.HasFrontDoor() {
		return nil
	}
	var urls []string
	for _, p := range ports {
		host := inject.FrontDoorHost(pod.Name, pod.Namespace, pod.UID, p, network.Domain())
		if slices.ContainsFunc(fronts, func(o client.Object) bool { return publishes(o, &network.FrontDoor.Gateway, p, host) }) {
			urls = append(urls, inject.FrontDoorURL(network, host))
		}
	}
	return urls
}

// publishes says whether obj, the shadow's Ingress or one of its HTTPRoutes, routes host to
// port; an HTTPRoute only once gw, the policy's Gateway, has accepted it.
func publishes(obj client.Object, gw *policy.GatewayRef, port int32, host string) bool {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		return ingressPublishes(o, port, host)
	case *gatewayv1.HTTPRoute:
		return routePublishes(o, gw, port, host)
	}
	return false
}

// ingressPublishes says whether the Ingress has a rule for host routing to port.
func ingressPublishes(ing *networkingv1.Ingress, port int32, host string) bool {
	for _, rule := range ing.Spec.Rules {
		if rule.Host == host && rule.HTTP != nil && len(rule.HTTP.Paths) > 0 && rule.HTTP.Paths[0].Backend.Service != nil &&
			rule.HTTP.Paths[0].Backend.Service.Port.Number == port {
			return true
		}
	}
	return false
}

// routePublishes says whether the HTTPRoute routes host to port and gw accepted the route as
// it is: a route no Gateway accepts publishes nothing (a listener's allowedRoutes may not admit
// its namespace), nor does one another Gateway accepted, nor one accepted at an older
// generation.
func routePublishes(route *gatewayv1.HTTPRoute, gw *policy.GatewayRef, port int32, host string) bool {
	if len(route.Spec.Rules) == 0 || len(route.Spec.Rules[0].BackendRefs) == 0 || route.Spec.Rules[0].BackendRefs[0].Port == nil ||
		int32(*route.Spec.Rules[0].BackendRefs[0].Port) != port || !slices.Contains(route.Spec.Hostnames, gatewayv1.Hostname(host)) {
		return false
	}
	for _, parent := range route.Status.Parents {
		accepted := meta.FindStatusCondition(parent.Conditions, string(gatewayv1.RouteConditionAccepted))
		if isGateway(parent.ParentRef, gw, route.Namespace) && accepted != nil && accepted.Status == metav1.ConditionTrue &&
			accepted.ObservedGeneration == route.Generation {
			return true
		}
	}
	return false
}

// isGateway says whether ref, a parent of a route in namespace ns, is gw (and its listener,
// when gw names one).
func isGateway(ref gatewayv1.ParentReference, gw *policy.GatewayRef, ns string) bool {
	group, kind, refNS := gatewayv1.GroupName, "Gateway", ns
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if ref.Namespace != nil {
		refNS = string(*ref.Namespace)
	}
	if group != gatewayv1.GroupName || kind != "Gateway" || string(ref.Name) != gw.Name || refNS != gw.Namespace {
		return false
	}
	return gw.SectionName == "" || (ref.SectionName != nil && string(*ref.SectionName) == gw.SectionName)
}

// reach says how to reach the pod through a Ready tunnel: at the front door's URLs, else
// through the shadow Service, from the cluster or with kubectl port-forward.
func reach(sh *shadowView, st tunnelstate.Status) string {
	to := ""
	if st.ComputeNode != "" {
		to = " to compute node " + st.ComputeNode
	}
	if sh.service == "" {
		return "the reverse tunnel" + to + " carries the job's connections into the cluster"
	}
	ns, name, _ := shadows.SplitKey(sh.service)
	ports := make([]string, len(sh.ports))
	for i, p := range sh.ports {
		ports[i] = fmt.Sprint(p)
	}
	mode := ""
	if st.ForwardMode != "" {
		mode = " (" + st.ForwardMode + ")"
	}
	if len(sh.urls) > 0 {
		return fmt.Sprintf("open %s; port %s forwarded%s%s, in the cluster at %s.%s.svc", strings.Join(sh.urls, " "), strings.Join(ports, ", "), to, mode, name, ns)
	}
	return fmt.Sprintf("connect to %s.%s.svc port %s, forwarded%s%s; from your machine: kubectl port-forward -n %s svc/%s %s",
		name, ns, strings.Join(ports, ", "), to, mode, ns, name, strings.Join(ports, " "))
}

// count keeps the gauge of tunnels by node, state and reason.
func (t *TunnelReporter) count(key types.NamespacedName, s series) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.states[key]
	if had && old == s {
		return
	}
	if had {
		t.add(old, -1)
	}
	t.states[key] = s
	t.add(s, 1)
}

// add changes the tunnels counted in series s by delta, and removes the series from the gauge
// once it counts none: a node dropped from the policy, or a reason no tunnel has any more,
// leaves no series behind. Called with mu held.
func (t *TunnelReporter) add(s series, delta int) {
	if t.tally == nil {
		t.tally = map[series]int{}
	}
	t.tally[s] += delta
	labels := []string{s.node, string(s.state), string(s.reason)}
	if n := t.tally[s]; n > 0 {
		t.metrics.Tunnels.WithLabelValues(labels...).Set(float64(n))
		return
	}
	delete(t.tally, s)
	t.metrics.Tunnels.DeleteLabelValues(labels...)
}

// transition counts a state written (writeState) that differs from the one before, and
// observes the time from the pod's creation to its tunnel's first Ready. A write that did not
// land (the Tunnel is gone, or another pod's) counts nothing: the next reconcile writes again.
func (t *TunnelReporter) transition(pod *corev1.Pod, prev tunnelstate.Status, hadPrev bool, next tunnelstate.Status) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	t.mu.Lock()
	w, ok := t.written[key]
	landed := ok && w.uid == pod.UID && w.status.State == next.State
	first := landed && next.State == tunnelstate.Ready && !w.ready
	if first {
		w.ready = true
		t.written[key] = w
	}
	t.mu.Unlock()
	from := metrics.TransitionFromNone
	if hadPrev {
		from = string(prev.State)
	}
	if !landed || from == string(next.State) {
		return
	}
	node := t.nodeLabel(pod)
	t.metrics.TunnelTransitions.WithLabelValues(node, from, string(next.State)).Inc()
	if first {
		t.metrics.TunnelReadySeconds.WithLabelValues(node).Observe(t.now().Sub(pod.CreationTimestamp.Time).Seconds())
	}
}

// nodeLabel is the pod's virtual node in the policy in force, metrics.NodeUnknown when none
// of its nodes takes the pod: the metrics' node label takes no value the policy does not name.
func (t *TunnelReporter) nodeLabel(pod *corev1.Pod) string {
	if node, ok := validate.VirtualNodeFor(&pod.Spec, t.policies.Current()); ok {
		return node
	}
	return metrics.NodeUnknown
}

// reasonLabel is r as the metrics' reason label: a reason of the catalogue, or empty; any
// other counts as TunnelDown, as tunnelstate.ParseReasonLine classifies a line it does not know.
func reasonLabel(r tunnelstate.Reason) tunnelstate.Reason {
	if r == "" || tunnelstate.Known(r) {
		return r
	}
	return tunnelstate.ReasonTunnelDown
}

// forget drops a pod that no longer has a tunnel to report from the gauge.
func (t *TunnelReporter) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.written, key)
	delete(t.waited, key)
	if old, ok := t.states[key]; ok {
		delete(t.states, key)
		t.add(old, -1)
	}
}
