package webhook

import (
	"context"
	"fmt"
	"maps"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Policies gives the policy in force; the PolicyStore in a server, a fixed one in tests.
type Policies interface {
	Current() *policy.Policy
}

var (
	podVersionKind = corev1.SchemeGroupVersion.WithKind("Pod")
	podKind        = podVersionKind.GroupKind()
	podMeta        = metav1.TypeMeta{APIVersion: podVersionKind.GroupVersion().String(), Kind: podVersionKind.Kind}
)

// PodMutator serves /mutate-pods: it records the reverse-bind address and prepends the
// pre-exec snippet (inject.MutatePod). A pod validate.Pod refuses is passed through untouched:
// /validate-pods refuses it with every error, and warnings are said there, once.
type PodMutator struct {
	policies Policies
	metrics  *Metrics
}

var _ admission.Handler = (*PodMutator)(nil)

// Handle implements admission.Handler.
func (m *PodMutator) Handle(_ context.Context, req admission.Request) admission.Response {
	pod, err := decodePod(req)
	if err != nil {
		return m.metrics.badRequest(PathMutatePods, err)
	}
	o, d := validate.Pod(pod, m.policies.Current())
	if o == nil || !d.Allowed() {
		m.metrics.decided(PathMutatePods, resultAllowed)
		return admission.Allowed("")
	}
	// MutatePod changes annotations only, so they are all the patch needs to compare.
	before := maps.Clone(pod.Annotations)
	warnings := inject.MutatePod(pod, o)
	m.metrics.decided(PathMutatePods, resultAllowed)
	if maps.Equal(before, pod.Annotations) {
		// Nothing to patch, which is also what a reinvocation sees: no patch means the API
		// server does not run the mutating webhooks yet again on our account.
		return admission.Allowed("").WithWarnings(warnings...)
	}
	return annotationsPatch(before, pod.Annotations).WithWarnings(warnings...)
}

// PodValidator serves /validate-pods: validate.Pod decides; on CREATE an admitted pod that
// needs a shadow gets it applied before the pod is stored, and a pod whose shadow cannot be
// applied is refused.
type PodValidator struct {
	policies Policies
	reader   client.Reader // uncached: whether a pod of the same name is already stored
	shadows  *Applier
	events   *PodEvents
	metrics  *Metrics
	rules    validate.CredentialRules // whether a shadow-same-ns pod may have the site's Secret copied
}

var _ admission.Handler = (*PodValidator)(nil)

// Handle implements admission.Handler.
func (v *PodValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, err := decodePod(req)
	if err != nil {
		return v.metrics.badRequest(PathValidatePods, err)
	}
	o, d := validate.Pod(pod, v.policies.Current())
	d.Errors = append(d.Errors, v.rules.SecretInPodNamespace(o, pod.Namespace, validate.PodPaths)...)
	if d.Allowed() && req.Operation == admissionv1.Create {
		// A pod the mutating webhook never prepared would run its job without its tunnel.
		d.Errors = append(d.Errors, inject.CheckMutated(pod, o)...)
	}
	if !d.Allowed() || o == nil || req.Operation != admissionv1.Create {
		v.metrics.decided(PathValidatePods, result(d))
		return respond(podKind, objectName(pod), d)
	}
	shadow, warnings := inject.BuildShadow(pod, o)
	d.Warnings = append(d.Warnings, warnings...)
	if shadow == nil {
		// Nothing to forward and no reverse tunnel, so no SOCKS proxy either: nothing to apply.
		v.metrics.decided(PathValidatePods, resultAllowed)
		return respond(podKind, objectName(pod), d)
	}
	// The API server refuses a name already taken only after the webhooks: without this look,
	// `kubectl create` of a stored pod's name would apply its shadow over the live pod's, with
	// the refused pod's UID, and the reconciler would then collect it.
	err = v.reader.Get(ctx, client.ObjectKeyFromObject(pod), &metav1.PartialObjectMetadata{TypeMeta: podMeta})
	switch {
	case err == nil:
		v.metrics.decided(PathValidatePods, resultDenied)
		status := apierrors.NewAlreadyExists(corev1.Resource("pods"), pod.Name).ErrStatus
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: d.Warnings}}
	case !apierrors.IsNotFound(err):
		v.metrics.decided(PathValidatePods, resultError)
		return refuseForShadow(fmt.Errorf("checking whether pod %s/%s already exists: %w", pod.Namespace, pod.Name, err), d.Warnings)
	}
	dryRun := req.DryRun != nil && *req.DryRun
	applyWarnings, err := v.shadows.Apply(ctx, shadow, dryRun)
	d.Warnings = append(d.Warnings, applyWarnings...)
	if err != nil {
		v.metrics.decided(PathValidatePods, resultDenied)
		return refuseForShadow(err, d.Warnings)
	}
	if o.SocksPort > 0 && !dryRun {
		v.events.socksProxyOnceStored(pod, o.SocksPort)
	}
	v.metrics.decided(PathValidatePods, resultAllowed)
	return respond(podKind, objectName(pod), d)
}

func result(d validate.Decision) string {
	if d.Allowed() {
		return resultAllowed
	}
	return resultDenied
}
