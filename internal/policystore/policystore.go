package policystore

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/interlink-hq/shadowgate/internal/eventnote"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Event reasons of the policy store, recorded on the policy ConfigMap.
const (
	ReasonInvalidPolicy = "InvalidPolicy"
	ReasonPolicyDeleted = "PolicyDeleted"
)

// PolicyStore serves the policy in force. It watches the one policy ConfigMap with an
// informer and swaps in each valid version atomically; an invalid or deleted one leaves the
// last valid policy in force, and says so in the log, a Warning Event and a metric.
type PolicyStore struct {
	ref      validate.PolicyRef
	rules    validate.CredentialRules
	lw       cache.ListerWatcher
	current  atomic.Pointer[loadedPolicy]
	informer atomic.Pointer[cache.Controller]
	recorder events.EventRecorder
	metrics  *metrics.Metrics
	log      logr.Logger
	// onChange is called after each new valid policy is in force (OnChange).
	onChange []func()
	// rejected is the resourceVersion of the last version found invalid. The informer hands
	// the same version over again on every relist; said once, it is not counted, logged and
	// recorded again. Only the informer's handlers, which run one at a time, touch it.
	rejected string
}

type loadedPolicy struct {
	policy          *policy.Policy
	resourceVersion string
}

var (
	_ Policies                       = (*PolicyStore)(nil)
	_ manager.LeaderElectionRunnable = (*PolicyStore)(nil)
)

// New reads the policy ConfigMap once. A missing policy, or one that is invalid or
// breaks rules, is an error naming the problem: the webhook does not start without a policy
// to decide by.
func New(ctx context.Context, cs kubernetes.Interface, ref validate.PolicyRef, rules validate.CredentialRules, recorder events.EventRecorder, metrics *metrics.Metrics, log logr.Logger) (*PolicyStore, error) {
	cm, err := cs.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("policy ConfigMap %s/%s does not exist: create it (manifests/examples/policy.yaml is an example) or name yours with --policy-configmap and --namespace", ref.Namespace, ref.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading policy ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	pol, errs := validate.PolicyConfigMap(cm, rules)
	if len(errs) > 0 {
		return nil, fmt.Errorf("policy ConfigMap %s/%s is invalid, or asks for what this shadowgate may not do (shadowgate policy check finds the same offline, given serve's credential flags):%s", ref.Namespace, ref.Name, bulleted(errs))
	}
	s := &PolicyStore{
		ref:      ref,
		rules:    rules,
		lw:       cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", ref.Namespace, fields.OneTermEqualSelector("metadata.name", ref.Name)),
		recorder: recorder,
		metrics:  metrics,
		log:      log,
	}
	s.current.Store(&loadedPolicy{policy: pol, resourceVersion: cm.ResourceVersion})
	metrics.PolicyStoredInForce.Set(1)
	log.Info("policy loaded", "configMap", ref.Namespace+"/"+ref.Name, "resourceVersion", cm.ResourceVersion, "virtualNodes", pol.NodeNames())
	logPolicyWarnings(log, pol)
	return s, nil
}

// Current implements Policies.
func (s *PolicyStore) Current() *policy.Policy { return s.current.Load().policy }

// OnChange has f called, on the watch's goroutine, after each new valid policy is put in
// force: f must not block. Call it before Start.
func (s *PolicyStore) OnChange(f func()) { s.onChange = append(s.onChange, f) }

// NeedLeaderElection is false: every replica admits, so every replica follows the policy.
func (s *PolicyStore) NeedLeaderElection() bool { return false }

// Start watches the policy ConfigMap until ctx ends.
func (s *PolicyStore) Start(ctx context.Context) error {
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: s.lw,
		ObjectType:    &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.load(obj) },
			UpdateFunc: func(_, obj any) { s.load(obj) },
			DeleteFunc: s.deleted,
		},
	})
	s.informer.Store(&informer)
	informer.RunWithContext(ctx)
	return nil
}

// Synced is a readiness check: ready once the watch has caught up with the ConfigMap.
func (s *PolicyStore) Synced(*http.Request) error {
	if informer := s.informer.Load(); informer != nil && (*informer).HasSynced() {
		return nil
	}
	return fmt.Errorf("the watch on policy ConfigMap %s/%s has not synced yet", s.ref.Namespace, s.ref.Name)
}

func (s *PolicyStore) load(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.ResourceVersion == s.current.Load().resourceVersion || cm.ResourceVersion == s.rejected {
		return
	}
	pol, errs := validate.PolicyConfigMap(cm, s.rules)
	if len(errs) > 0 {
		s.rejected = cm.ResourceVersion
		kept := s.current.Load().resourceVersion
		s.metrics.PolicyReloads.WithLabelValues(metrics.ReloadInvalid).Inc()
		s.metrics.PolicyStoredInForce.Set(0)
		s.log.Error(errs.ToAggregate(), "stored policy is invalid; still serving the last valid one", "resourceVersion", cm.ResourceVersion, "serving", kept)
		s.recorder.Eventf(cm, nil, corev1.EventTypeWarning, ReasonInvalidPolicy, "Reload", "%s", eventnote.Truncate(fmt.Sprintf(
			"policy not loaded, shadowgate still serves the last valid one (resourceVersion %s); fix it and re-apply (shadowgate policy check validates it offline):%s",
			kept, bulleted(errs))))
		return
	}
	s.current.Store(&loadedPolicy{policy: pol, resourceVersion: cm.ResourceVersion})
	s.metrics.PolicyReloads.WithLabelValues(metrics.ReloadValid).Inc()
	s.metrics.PolicyStoredInForce.Set(1)
	s.log.Info("policy loaded", "resourceVersion", cm.ResourceVersion, "virtualNodes", pol.NodeNames())
	logPolicyWarnings(s.log, pol)
	for _, f := range s.onChange {
		f()
	}
}

// logPolicyWarnings says each of validate.PolicyWarnings on a line of its own, so the one an
// admin looks for (a virtual node any namespace may use) is not lost in a list.
func logPolicyWarnings(log logr.Logger, pol *policy.Policy) {
	for _, w := range validate.PolicyWarnings(pol, field.NewPath("data").Key(policy.DataKey)) {
		log.Info("policy warning", "warning", w)
	}
}

func (s *PolicyStore) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	kept := s.current.Load().resourceVersion
	s.metrics.PolicyReloads.WithLabelValues(metrics.ReloadDeleted).Inc()
	s.metrics.PolicyStoredInForce.Set(0)
	s.log.Error(nil, "policy ConfigMap deleted; still serving the last valid policy until it is created again", "serving", kept)
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		s.recorder.Eventf(cm, nil, corev1.EventTypeWarning, ReasonPolicyDeleted, "Reload",
			"policy ConfigMap deleted; shadowgate serves the last valid policy (resourceVersion %s) until it is created again, and will not start without it", kept)
	}
}

// bulleted lists errors one per line, as kubectl lists the causes of a refusal.
func bulleted(errs field.ErrorList) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("\n* " + e.Error())
	}
	return b.String()
}

// Policies gives the policy in force: the PolicyStore when serving, a fixed one in tests.
type Policies interface {
	Current() *policy.Policy
}
