package webhook

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/validate"
)

// WorkloadValidator serves /validate-workloads: the pod template of a Deployment,
// StatefulSet, DaemonSet, ReplicaSet, Job or CronJob is judged as its pods will be, so a bad
// template is refused at apply rather than in every pod the controller tries to create.
type WorkloadValidator struct {
	policies Policies
	ref      validate.PolicyRef
	rules    validate.CredentialRules
	metrics  *Metrics
}

var _ admission.Handler = (*WorkloadValidator)(nil)

// workloadKinds are the kinds /validate-workloads judges, as the webhook configurations'
// rules send them, each with a new object to decode it into.
var workloadKinds = map[schema.GroupVersionKind]func() runtime.Object{
	appsv1.SchemeGroupVersion.WithKind("Deployment"):  func() runtime.Object { return &appsv1.Deployment{} },
	appsv1.SchemeGroupVersion.WithKind("StatefulSet"): func() runtime.Object { return &appsv1.StatefulSet{} },
	appsv1.SchemeGroupVersion.WithKind("DaemonSet"):   func() runtime.Object { return &appsv1.DaemonSet{} },
	appsv1.SchemeGroupVersion.WithKind("ReplicaSet"):  func() runtime.Object { return &appsv1.ReplicaSet{} },
	batchv1.SchemeGroupVersion.WithKind("Job"):        func() runtime.Object { return &batchv1.Job{} },
	batchv1.SchemeGroupVersion.WithKind("CronJob"):    func() runtime.Object { return &batchv1.CronJob{} },
}

// workloadKindNames names workloadKinds in a refusal.
const workloadKindNames = "Deployment, StatefulSet, DaemonSet and ReplicaSet (apiVersion apps/v1), Job and CronJob (apiVersion batch/v1)"

// Handle implements admission.Handler.
func (v *WorkloadValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	gvk := schema.GroupVersionKind(req.Kind)
	newObject, ok := workloadKinds[gvk]
	if !ok {
		return v.metrics.badRequest(PathValidateWorkloads, wrongKind(workloadKindNames, gvk))
	}
	obj := newObject()
	if err := decodeObject(req, obj, gvk); err != nil {
		return v.metrics.badRequest(PathValidateWorkloads, err)
	}
	// Every workload kind is judged: the template's pods, and the credentials they would
	// have copied, under the template's path.
	d, _ := validate.Object(obj, v.policies.Current(), v.ref, v.rules)
	v.metrics.decided(PathValidateWorkloads, result(d))
	name := req.Name
	if m, err := apimeta.Accessor(obj); err == nil {
		name = objectName(m)
	}
	return respond(gvk.GroupKind(), name, d)
}

var configMapVersionKind = corev1.SchemeGroupVersion.WithKind("ConfigMap")

// ConfigMapValidator serves /validate-configmaps: the policy ConfigMap must hold a valid
// policy, and a node ConfigMap's compute-node must be a hostname or IP literal, since the
// shadow passes it to ssh.
type ConfigMapValidator struct {
	policies Policies
	ref      validate.PolicyRef
	rules    validate.CredentialRules
	metrics  *Metrics
}

var _ admission.Handler = (*ConfigMapValidator)(nil)

// Handle implements admission.Handler.
func (v *ConfigMapValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	cm, err := objectOf[corev1.ConfigMap](req, configMapVersionKind)
	if err != nil {
		return v.metrics.badRequest(PathValidateConfigMaps, err)
	}
	// A valid policy this serve cannot carry out would be refused at its next reload, so it is
	// refused here too.
	d, _ := validate.Object(cm, v.policies.Current(), v.ref, v.rules)
	v.metrics.decided(PathValidateConfigMaps, result(d))
	return respond(configMapVersionKind.GroupKind(), objectName(cm), d)
}
