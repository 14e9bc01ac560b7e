package webhook

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/validate"
)

var (
	podVersionKind = corev1.SchemeGroupVersion.WithKind("Pod")
	podKind        = podVersionKind.GroupKind()
	podMeta        = metav1.TypeMeta{APIVersion: podVersionKind.GroupVersion().String(), Kind: podVersionKind.Kind}
)

// PodMutator serves /mutate-pods: inject.Mutate decides, and its annotations are the patch.
type PodMutator struct {
	configs policystore.Configs
}

var _ admission.Handler = (*PodMutator)(nil)

// NewPodMutator is /mutate-pods' handler, deciding by the policy policies holds, by fixed and
// by the labels namespaces reads.
func NewPodMutator(policies policystore.Policies, fixed validate.Config, namespaces policystore.Namespaces) *PodMutator {
	return &PodMutator{configs: policystore.Configs{Policies: policies, Fixed: fixed, Namespaces: namespaces}}
}

// Handle implements admission.Handler.
func (m *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, err := decodePod(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	cfg, err := m.configs.Now(ctx, pod.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	mutation, inTime := decideBy(ctx, len(req.Object.Raw), func() inject.Mutation { return inject.Mutate(pod, cfg) })
	if !inTime {
		return tooLate(ctx)
	}
	if mutation.Annotations == nil {
		// Nothing to patch, which is also what a reinvocation sees: no patch means the API
		// server does not run the mutating webhooks yet again on our account.
		return admission.Allowed("").WithWarnings(mutation.Warnings...)
	}
	return annotationsPatch(pod.Annotations, mutation.Annotations).WithWarnings(mutation.Warnings...)
}

// PodValidator serves /validate-pods: on CREATE inject.Admit decides, and an admitted pod that
// needs a shadow gets it applied before the pod is stored; a pod whose shadow cannot be
// applied is refused. Any other operation is judged by validate.Pod alone.
type PodValidator struct {
	configs policystore.Configs
	reader  client.Reader // uncached: whether a pod of the same name is already stored
	shadows applier.ShadowApplier
	events  *PodEvents
}

var _ admission.Handler = (*PodValidator)(nil)

// NewPodValidator is /validate-pods' handler: it decides by the policy policies holds and by
// fixed and the labels namespaces reads, asks reader whether a pod's name is taken, applies shadows with shadows, and records
// the SOCKS proxy's Event with events (none when nil).
func NewPodValidator(policies policystore.Policies, fixed validate.Config, namespaces policystore.Namespaces, reader client.Reader, shadows applier.ShadowApplier, events *PodEvents) *PodValidator {
	return &PodValidator{configs: policystore.Configs{Policies: policies, Fixed: fixed, Namespaces: namespaces}, reader: reader, shadows: shadows, events: events}
}

// Handle implements admission.Handler.
func (v *PodValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, err := decodePod(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	cfg, err := v.configs.Now(ctx, pod.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if req.Operation != admissionv1.Create {
		d, inTime := decideBy(ctx, len(req.Object.Raw), func() validate.Decision { _, d := validate.Pod(pod, cfg); return d })
		if !inTime {
			return tooLate(ctx)
		}
		return respond(podKind, objectName(pod), d)
	}
	a, inTime := decideBy(ctx, len(req.Object.Raw), func() inject.Admission { return inject.Admit(pod, cfg) })
	if !inTime {
		return tooLate(ctx)
	}
	d := a.Decision
	if !d.Allowed() || a.Shadow == nil {
		return respond(podKind, objectName(pod), d)
	}
	// The API server refuses a name already taken only after the webhooks: without this look,
	// `kubectl create` of a stored pod's name would apply its shadow over the live pod's, with
	// the refused pod's UID, and the reconciler would then collect it.
	err = v.reader.Get(ctx, client.ObjectKeyFromObject(pod), &metav1.PartialObjectMetadata{TypeMeta: podMeta})
	switch {
	case err == nil:
		status := apierrors.NewAlreadyExists(corev1.Resource("pods"), pod.Name).ErrStatus
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: d.Warnings}}
	case !apierrors.IsNotFound(err):
		return refuseForShadow(fmt.Errorf("checking whether pod %s/%s already exists: %w", pod.Namespace, pod.Name, err), d.Warnings)
	}
	dryRun := req.DryRun != nil && *req.DryRun
	applyWarnings, err := v.shadows.Apply(ctx, a.Shadow, dryRun)
	d.Warnings = append(d.Warnings, applyWarnings...)
	if err != nil {
		return refuseForShadow(err, d.Warnings)
	}
	if a.Offload.SocksPort > 0 && !dryRun && v.events != nil {
		v.events.socksProxyOnceStored(pod, a.Offload.SocksPort)
	}
	return respond(podKind, objectName(pod), d)
}
