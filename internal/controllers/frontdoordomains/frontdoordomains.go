package frontdoordomains

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// FieldManager is the field manager of shadowgate's writes to the ConfigMap.
const FieldManager = "shadowgate-front-door-domains"

// DefaultName is the ConfigMap's name unless serve is told another.
const DefaultName = "shadowgate-front-door-domains"

// Policies gives the policy in force and says when it changes (policystore.PolicyStore).
type Policies interface {
	Current() *policy.Policy
	OnChange(func())
}

// ShadowNamespaces says whether a namespace is a shadow namespace, marked by shadowgate for a
// pod namespace (shadows.Identity).
type ShadowNamespaces interface {
	ShadowNamespaceFor(ctx context.Context, ns string) (string, error)
}

// Live is where the Publisher reads the front-door objects shadowgate has written: the
// manager's cache, which holds shadowgate's Ingresses and, when the API server serves them,
// its HTTPRoutes (shadows.Objects).
type Live struct {
	Cache      client.Reader
	Informers  ctrlcache.Informers
	GatewayAPI bool
	Namespaces ShadowNamespaces
}

// Rolling is the value of a domain no virtual node publishes under any more, reserved while a
// shadow still serves a host under it.
const Rolling = "(shadows rolling)"

// Publisher keeps the ConfigMap ref saying the domains of the policy in force and those under
// which shadows still serve.
type Publisher struct {
	client   kubernetes.Interface
	ref      types.NamespacedName
	policies Policies
	live     Live
	log      logr.Logger
	// changed holds one pending request to compare the ConfigMap with the policy.
	changed chan struct{}
}

// New is a Publisher of ref, the ConfigMap the shipped ValidatingAdmissionPolicyBinding names
// as its parameter. Call it before the policy store starts: it asks to hear of its changes.
func New(client kubernetes.Interface, ref types.NamespacedName, policies Policies, live Live, log logr.Logger) *Publisher {
	p := &Publisher{client: client, ref: ref, policies: policies, live: live, log: log, changed: make(chan struct{}, 1)}
	policies.OnChange(p.kick)
	return p
}

// Domains are the ConfigMap's data for pol: each domain a virtual node's front door publishes
// under (policy.Network.Domain), with the nodes that do, sorted and comma-separated.
func Domains(pol *policy.Policy) map[string]string {
	nodes := map[string][]string{}
	for name, node := range pol.VirtualNodes {
		if node.Network.HasFrontDoor() {
			d := node.Network.Domain()
			nodes[d] = append(nodes[d], name)
		}
	}
	data := make(map[string]string, len(nodes))
	for d, names := range nodes {
		slices.Sort(names)
		data[d] = strings.Join(names, ",")
	}
	return data
}

// reserved are the ConfigMap's data: the domains of pol (Domains), and each other domain under
// which a front-door object in a shadow namespace still has a host, valued Rolling. A shadow
// keeps its hosts until its roll's turn after the policy names another domain or none; until
// then its domain stays reserved. Objects in pod namespaces (interlink.eu/shadow-same-ns) are
// their tenants' to edit, so they never widen the reservation; nor does a host whose domain a
// WildcardDNS could not name.
func (p *Publisher) reserved(ctx context.Context, pol *policy.Policy) (map[string]string, error) {
	data := Domains(pol)
	objs := []client.ObjectList{&networkingv1.IngressList{}}
	if p.live.GatewayAPI {
		objs = append(objs, &gatewayv1.HTTPRouteList{})
	}
	shadowNS := map[string]bool{}
	for _, list := range objs {
		if err := p.live.Cache.List(ctx, list); err != nil {
			return nil, err
		}
		err := apimeta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			ns := obj.GetNamespace()
			is, seen := shadowNS[ns]
			if !seen {
				podNS, err := p.live.Namespaces.ShadowNamespaceFor(ctx, ns)
				if err != nil {
					return err
				}
				is = podNS != ""
				shadowNS[ns] = is
			}
			if !is {
				return nil
			}
			for _, host := range hosts(obj) {
				_, d, _ := strings.Cut(host, ".")
				if _, ok := data[d]; !ok && validate.IsFrontDoorDomain(d) {
					data[d] = Rolling
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return data, nil
}

// hosts are the hosts obj, an Ingress or an HTTPRoute, serves or holds a certificate for.
func hosts(obj client.Object) []string {
	var out []string
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		for _, r := range o.Spec.Rules {
			out = append(out, r.Host)
		}
		for _, t := range o.Spec.TLS {
			out = append(out, t.Hosts...)
		}
	case *gatewayv1.HTTPRoute:
		for _, h := range o.Spec.Hostnames {
			out = append(out, string(h))
		}
	}
	return out
}

// NeedLeaderElection is true: one writer is enough, and replicas would only repeat it.
func (p *Publisher) NeedLeaderElection() bool { return true }

// kick asks for a comparison; one pending request stands for any number.
func (p *Publisher) kick() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// Start watches the ConfigMap, and shadowgate's Ingresses and HTTPRoutes in the manager's
// cache, and writes the ConfigMap whenever it differs from reserved, until ctx ends.
func (p *Publisher) Start(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(p.client, 0, informers.WithNamespace(p.ref.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.ref.Name).String()
		}))
	informer := factory.Core().V1().ConfigMaps()
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.kick() },
		UpdateFunc: func(any, any) { p.kick() },
		DeleteFunc: func(any) { p.kick() },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	synced := []cache.InformerSynced{informer.Informer().HasSynced}
	live := []client.Object{&networkingv1.Ingress{}}
	if p.live.GatewayAPI {
		live = append(live, &gatewayv1.HTTPRoute{})
	}
	for _, obj := range live {
		inf, err := p.live.Informers.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { p.kick() },
			UpdateFunc: func(any, any) { p.kick() },
			DeleteFunc: func(any) { p.kick() },
		})
		if err != nil {
			return err
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
		synced = append(synced, reg.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	lister := informer.Lister().ConfigMaps(p.ref.Namespace)
	backoff := workqueue.DefaultTypedControllerRateLimiter[string]()
	p.kick()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.changed:
		case <-retry:
		}
		retry = nil
		current, err := lister.Get(p.ref.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := p.publish(ctx, current); err != nil {
			delay := backoff.When(p.ref.Name)
			p.log.Error(err, "writing the front door's domains; tenants' hosts under a new domain are not refused until it is written", "configMap", p.ref.String(), "retryIn", delay)
			retry = time.After(delay)
			continue
		}
		backoff.Forget(p.ref.Name)
	}
}

// publish writes the reserved domains (reserved) unless current already holds exactly them: it creates the ConfigMap when there is none, and otherwise patches its data to exactly
// them, removing keys whoever added them. The patch carries current's resourceVersion, so the
// API server refuses it if the ConfigMap changed since (the next comparison sees the change).
func (p *Publisher) publish(ctx context.Context, current *corev1.ConfigMap) error {
	want, err := p.reserved(ctx, p.policies.Current())
	if err != nil {
		return fmt.Errorf("reading shadowgate's front-door objects: %w", err)
	}
	if current != nil && maps.Equal(current.Data, want) {
		return nil
	}
	cms := p.client.CoreV1().ConfigMaps(p.ref.Namespace)
	if current == nil {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: p.ref.Name, Namespace: p.ref.Namespace,
				Labels: map[string]string{"app.kubernetes.io/name": "shadowgate", "app.kubernetes.io/component": "front-door-domains"}},
			Data: want,
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("creating ConfigMap %s: %w", p.ref, err)
		}
	} else {
		patch, err := dataPatch(current, want)
		if err != nil {
			return fmt.Errorf("patching ConfigMap %s: %w", p.ref, err)
		}
		if _, err := cms.Patch(ctx, p.ref.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("patching ConfigMap %s: %w", p.ref, err)
		}
	}
	p.log.Info("front door domains reserved for shadowgate", "configMap", p.ref.String(), "domains", slices.Sorted(maps.Keys(want)))
	return nil
}

// dataPatch is the patch that makes current's data exactly want, and applies only to the
// version of current read (its resourceVersion).
func dataPatch(current *corev1.ConfigMap, want map[string]string) ([]byte, error) {
	original, err := json.Marshal(&corev1.ConfigMap{Data: current.Data})
	if err != nil {
		return nil, err
	}
	modified, err := json.Marshal(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: current.ResourceVersion}, Data: want})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(original, modified, &corev1.ConfigMap{})
}
