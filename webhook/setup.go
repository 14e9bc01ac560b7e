package webhook

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/controllers/collector"
	"github.com/interlink-hq/shadowgate/controllers/follower"
	"github.com/interlink-hq/shadowgate/controllers/reconciler"
	"github.com/interlink-hq/shadowgate/controllers/tunnels"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/internal/serving"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/validate"
)

// Endpoints (DESIGN.md); the webhook configurations in manifests/ name the same paths.
const (
	PathMutatePods         = "/mutate-pods"
	PathValidatePods       = "/validate-pods"
	PathValidateWorkloads  = "/validate-workloads"
	PathValidateConfigMaps = "/validate-configmaps"
)

// EventReporter names shadowgate as the reporting controller of its Events.
const EventReporter = "shadowgate"

// Options configure the webhook and the reconciler.
type Options struct {
	// Policy names the policy ConfigMap; its namespace is also where credentials are copied from.
	Policy validate.PolicyRef
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
}

// Setup reads the policy (an error when it is missing or invalid), then registers the
// admission endpoints, the policy watch, the pod Event recorder, the reconciler, the
// credential follower (with replication) and the readiness checks with mgr. The endpoints
// answer on every replica; the reconciler and the follower run on the leader. The returned
// wait blocks until the removals of refused pods' shadow objects, which run after the denial
// is sent, have finished: call it once mgr has stopped, since the webhook server can start
// more of them until then.
func Setup(ctx context.Context, mgr manager.Manager, opts Options, metrics *metrics.Metrics, decisions *serving.Decisions) (wait func(), err error) {
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
	recorder := mgr.GetEventRecorder(EventReporter)
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
	events := newPodEvents(mgr.GetClient(), recorder)
	fixed := validate.Config{PolicyRef: opts.Policy, Credentials: opts.Rules}
	// The namespace informer is asked for now, so it starts and syncs with the manager's cache
	// rather than on the first pod; it holds the namespaces' metadata only.
	if _, err := mgr.GetCache().GetInformer(ctx, &metav1.PartialObjectMetadata{TypeMeta: policystore.NamespaceMeta}); err != nil {
		return nil, err
	}
	namespaces := policystore.CachedNamespaces{Cache: mgr.GetCache(), Live: mgr.GetAPIReader()}
	identity := shadows.Identity{Namespaces: namespaces, Cache: mgr.GetClient(), Policies: store, Rules: opts.Rules}
	unconfirmed := newUnconfirmedShadows(opts.MaxUnconfirmedShadows, opts.UnconfirmedShare, opts.ShadowGracePeriod, metrics)
	// Every replica's cache sees every pod stored: the one whose admission applied its
	// shadow stops counting it there.
	pods, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			unconfirmed.release(p.UID)
		}
	}}); err != nil {
		return nil, err
	}
	server := mgr.GetWebhookServer()
	for path, h := range map[string]admission.Handler{
		PathMutatePods:         NewPodMutator(store, fixed, namespaces),
		PathValidatePods:       NewPodValidator(store, fixed, namespaces, mgr.GetAPIReader(), boundedApplier{shadowApplier, unconfirmed}, events),
		PathValidateConfigMaps: NewConfigMapValidator(store, fixed),
		PathValidateWorkloads:  NewWorkloadValidator(store, fixed, namespaces),
	} {
		server.Register(path, serving.Route(path, h, decisions))
	}
	collector := collector.New(mgr.GetClient(), mgr.GetAPIReader(), identity, mgr.GetClient(), store, opts.Policy.Namespace, opts.ShadowGracePeriod, metrics)
	for _, r := range []manager.Runnable{store, events, collector} {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	reconciler := reconciler.New(ctx, mgr, identity, store, namespaces, shadowApplier, applyClient, recorder, metrics, opts.ShadowGracePeriod, opts.Rules, opts.MaxRollingShadows)
	if err := reconciler.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	if err := tunnels.New(mgr, identity, applyClient, store, recorder, metrics).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if sources != nil {
		follower := follower.New(mgr.GetClient(), identity, sources, shadowApplier, store, opts.Policy.Namespace, recorder, metrics)
		if err := follower.SetupWithManager(ctx, mgr, sources.Cache()); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook-server", server.StartedChecker()); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("policy", store.Synced); err != nil {
		return nil, err
	}
	return shadowApplier.Wait, nil
}
