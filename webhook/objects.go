package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/validate"
)

// WorkloadValidator serves /validate-workloads: the pod template of a Deployment,
// StatefulSet, DaemonSet, ReplicaSet, Job or CronJob is judged as its pods will be, so a bad
// template is refused at apply rather than in every pod the controller tries to create.
type WorkloadValidator struct {
	scheme   *runtime.Scheme
	policies Policies
	ref      validate.PolicyRef
	metrics  *Metrics
}

var _ admission.Handler = (*WorkloadValidator)(nil)

// Handle implements admission.Handler.
func (v *WorkloadValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	gvk := schema.GroupVersionKind(req.Kind)
	obj, err := v.scheme.New(gvk)
	if err != nil {
		return v.metrics.badRequest(PathValidateWorkloads, err)
	}
	if err := decodeObject(req.Object, obj); err != nil {
		return v.metrics.badRequest(PathValidateWorkloads, err)
	}
	d, judged := validate.Object(obj, v.policies.Current(), v.ref)
	if !judged {
		// The webhook configuration sends only the kinds validate judges; anything else is a
		// configuration mistake worth a log line, not a refusal of the user's object.
		log.FromContext(ctx).Info("admitted a kind shadowgate does not judge; check the rules of the ValidatingWebhookConfiguration", "kind", gvk.String())
	}
	v.metrics.decided(PathValidateWorkloads, result(d))
	name := req.Name
	if m, err := apimeta.Accessor(obj); err == nil {
		name = objectName(m)
	}
	return respond(gvk.GroupKind(), name, d)
}

// ConfigMapValidator serves /validate-configmaps: the policy ConfigMap must hold a valid
// policy, and a node ConfigMap's compute-node must be a hostname or IP literal, since the
// shadow passes it to ssh.
type ConfigMapValidator struct {
	policies Policies
	ref      validate.PolicyRef
	metrics  *Metrics
}

var _ admission.Handler = (*ConfigMapValidator)(nil)

// Handle implements admission.Handler.
func (v *ConfigMapValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	cm, err := objectOf[corev1.ConfigMap](req.Object)
	if err != nil {
		return v.metrics.badRequest(PathValidateConfigMaps, err)
	}
	d, _ := validate.Object(cm, v.policies.Current(), v.ref)
	v.metrics.decided(PathValidateConfigMaps, result(d))
	return respond(schema.GroupKind{Kind: "ConfigMap"}, objectName(cm), d)
}
