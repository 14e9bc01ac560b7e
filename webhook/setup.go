package webhook

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/internal/serving"
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

// Options configure the admission handlers.
type Options struct {
	// Policy names the policy ConfigMap; its namespace is also where credentials are copied from.
	Policy validate.PolicyRef
	// Rules are what this serve may do with credentials; a policy or pod that needs more is refused.
	Rules validate.CredentialRules
	// ShadowGracePeriod is how long a shadow applied for a pod not stored yet counts against
	// the bound: the reconciler deletes it after as long.
	ShadowGracePeriod time.Duration
	// MaxUnconfirmedShadows bounds the shadows applied at admission for pods not stored yet.
	MaxUnconfirmedShadows int
	// UnconfirmedShare is how many of those the pods of one namespace may hold.
	UnconfirmedShare int
}

// Setup registers with mgr the admission endpoints, deciding by the policy policies holds and
// the labels namespaces reads and applying admitted pods' shadows with shadows behind the bound
// on unconfirmed ones, the recorder of Events on admitted pods, and the webhook server's
// readiness check. The endpoints answer on every replica. The bounds must be positive.
func Setup(ctx context.Context, mgr manager.Manager, opts Options, policies policystore.Policies, namespaces policystore.Namespaces, shadows applier.ShadowApplier, recorder events.EventRecorder, metrics *metrics.Metrics, decisions *serving.Decisions) error {
	events := newPodEvents(mgr.GetClient(), recorder)
	fixed := validate.Config{PolicyRef: opts.Policy, Credentials: opts.Rules}
	unconfirmed := newUnconfirmedShadows(opts.MaxUnconfirmedShadows, opts.UnconfirmedShare, opts.ShadowGracePeriod, metrics)
	// Every replica's cache sees every pod stored: the one whose admission applied its
	// shadow stops counting it there.
	pods, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			unconfirmed.release(p.UID)
		}
	}}); err != nil {
		return err
	}
	server := mgr.GetWebhookServer()
	for path, h := range map[string]admission.Handler{
		PathMutatePods:         NewPodMutator(policies, fixed, namespaces),
		PathValidatePods:       NewPodValidator(policies, fixed, namespaces, mgr.GetAPIReader(), boundedApplier{shadows, unconfirmed}, events),
		PathValidateConfigMaps: NewConfigMapValidator(policies, fixed),
		PathValidateWorkloads:  NewWorkloadValidator(policies, fixed, namespaces),
	} {
		server.Register(path, serving.Route(path, h, decisions))
	}
	if err := mgr.Add(events); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhook-server", server.StartedChecker())
}
