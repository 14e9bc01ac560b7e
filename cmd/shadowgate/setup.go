package main

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/controllers/collector"
	"github.com/interlink-hq/shadowgate/internal/controllers/follower"
	"github.com/interlink-hq/shadowgate/internal/controllers/frontdoordomains"
	"github.com/interlink-hq/shadowgate/internal/controllers/reconciler"
	tunnelreporter "github.com/interlink-hq/shadowgate/internal/controllers/tunnels"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/internal/serving"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/webhook"
)

// setupOptions configure the admission handlers and the controllers.
type setupOptions struct {
	// Policy names the policy ConfigMap; its namespace is also where credentials are copied from.
	Policy validate.PolicyRef
	// FrontDoorDomains names the ConfigMap listing the front door's domains (frontdoordomains).
	FrontDoorDomains types.NamespacedName
	// ShadowGracePeriod is how long a shadow whose pod was never seen waits before deletion.
	ShadowGracePeriod time.Duration
	// Rules are what this serve may do with credentials; a policy or pod that needs more is refused.
	Rules validate.CredentialRules
	// MaxUnconfirmedShadows bounds the shadows applied at admission for pods not stored yet.
	MaxUnconfirmedShadows int
	// UnconfirmedShare is how many of those the pods of one namespace may hold.
	UnconfirmedShare int
	// MaxRollingShadows bounds the shadows rolled at a time to a changed policy (rollPacer).
	MaxRollingShadows int
	// GatewayAPI is set when the API server serves HTTPRoutes (shadows.GatewayAPIServed).
	GatewayAPI bool
}

// setup reads the policy (an error when it is missing or invalid), then registers the
// admission endpoints and the pod Event recorder (webhook.Setup), the policy watch, the
// collector, the front door's domains, the reconciler, the tunnel reporter, the credential follower (with replication)
// and the readiness checks with mgr. The endpoints
// answer on every replica; the reconciler and the follower run on the leader. The returned
// wait blocks until the removals of refused pods' shadow objects, which run after the denial
// is sent, have finished: call it once mgr has stopped, since the webhook server can start
// more of them until then.
func setup(ctx context.Context, mgr manager.Manager, opts setupOptions, metrics *metrics.Metrics, decisions *serving.Decisions) (wait func(), err error) {
	if opts.ShadowGracePeriod <= 0 {
		return nil, errors.New("the shadow grace period must be positive")
	}
	if opts.MaxUnconfirmedShadows <= 0 || opts.UnconfirmedShare <= 0 {
		return nil, errors.New("the bounds on unconfirmed shadows must be positive")
	}
	if opts.MaxRollingShadows <= 0 {
		return nil, errors.New("the bound on shadows rolled at a time must be positive")
	}
	cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	recorder := mgr.GetEventRecorder(webhook.EventReporter)
	store, err := policystore.New(ctx, cs, opts.Policy, opts.Rules, recorder, metrics, mgr.GetLogger().WithName("policy"))
	if err != nil {
		return nil, err
	}
	applyClient, err := applier.NewClient(mgr)
	if err != nil {
		return nil, err
	}
	var sources *applier.CredentialSources
	if !opts.Rules.WithoutReplication {
		// Without replication shadowgate may not read Secrets, and has no copy to keep.
		if sources, err = applier.NewCredentialSources(ctx, mgr, opts.Policy.Namespace); err != nil {
			return nil, err
		}
	}
	shadowApplier := applier.New(applyClient, mgr.GetAPIReader(), mgr.GetScheme(), opts.Policy.Namespace, metrics, sources)
	// The namespace informer is asked for now, so it starts and syncs with the manager's cache
	// rather than on the first pod; it holds the namespaces' metadata only.
	if _, err := mgr.GetCache().GetInformer(ctx, &metav1.PartialObjectMetadata{TypeMeta: policystore.NamespaceMeta}); err != nil {
		return nil, err
	}
	namespaces := policystore.CachedNamespaces{Cache: mgr.GetCache(), Live: mgr.GetAPIReader()}
	identity := shadows.Identity{Namespaces: namespaces, Cache: mgr.GetClient(), Policies: store, Rules: opts.Rules, GatewayAPI: opts.GatewayAPI}
	admission := webhook.Options{Policy: opts.Policy, Rules: opts.Rules, ShadowGracePeriod: opts.ShadowGracePeriod,
		MaxUnconfirmedShadows: opts.MaxUnconfirmedShadows, UnconfirmedShare: opts.UnconfirmedShare}
	if err := webhook.Setup(ctx, mgr, admission, store, namespaces, shadowApplier, recorder, metrics, decisions); err != nil {
		return nil, err
	}
	var sourceCache client.Reader
	if sources != nil {
		sourceCache = sources.Cache()
	}
	shadowCollector := collector.New(mgr.GetClient(), mgr.GetAPIReader(), identity, mgr.GetClient(), store, opts.Policy.Namespace, sourceCache, opts.ShadowGracePeriod, metrics)
	live := frontdoordomains.Live{Cache: mgr.GetCache(), Informers: mgr.GetCache(), GatewayAPI: opts.GatewayAPI, Namespaces: identity}
	nodesOfPolicy := func() { metrics.ForNodes(slices.Collect(maps.Keys(store.Current().VirtualNodes))) }
	nodesOfPolicy()
	store.OnChange(nodesOfPolicy)
	domains := frontdoordomains.New(cs, opts.FrontDoorDomains, store, live, mgr.GetLogger().WithName("front-door-domains"))
	for _, r := range []manager.Runnable{store, shadowCollector, domains} {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	shadowReconciler := reconciler.New(ctx, mgr, identity, store, namespaces, shadowApplier, applyClient, recorder, metrics, opts.ShadowGracePeriod, opts.Rules, opts.MaxRollingShadows)
	if err := shadowReconciler.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	if err := tunnelreporter.New(mgr, identity, applyClient, store, recorder, metrics).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if sources != nil {
		copyFollower := follower.New(mgr.GetClient(), identity, sources, shadowApplier, store, opts.Policy.Namespace, recorder, metrics)
		if err := copyFollower.SetupWithManager(ctx, mgr, sources.Cache()); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("policy", store.Synced); err != nil {
		return nil, err
	}
	return shadowApplier.Wait, nil
}
