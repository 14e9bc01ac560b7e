package webhook

import (
	"context"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/validate"
)

// WorkloadValidator serves /validate-workloads: the pod template of a Deployment,
// StatefulSet, DaemonSet, ReplicaSet, Job or CronJob is judged as its pods will be, so a bad
// template is refused at apply rather than in every pod the controller tries to create.
type WorkloadValidator struct {
	configs policystore.Configs
}

var _ admission.Handler = (*WorkloadValidator)(nil)

// NewWorkloadValidator is /validate-workloads' handler, deciding by the policy policies holds
// by fixed and by the labels namespaces reads.
func NewWorkloadValidator(policies policystore.Policies, fixed validate.Config, namespaces policystore.Namespaces) *WorkloadValidator {
	return &WorkloadValidator{configs: policystore.Configs{Policies: policies, Fixed: fixed, Namespaces: namespaces}}
}

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

// Handle implements admission.Handler. A CREATE, and an UPDATE that changes the pod template,
// is judged in full. An UPDATE that leaves the template as stored (scaling, labels, a
// finalizer removed, the deployment controller's writes to its ReplicaSets) is admitted: it
// makes no pod differ from what was admitted before, and refusing it under a policy tightened
// since would stall the controllers and the garbage collector on the workload, its deletion
// too. A workload being deleted is admitted whatever the update, for the same reason. This
// holds while a replica answers: the update is still sent (a matchCondition comparing whole
// templates would cost CEL more than its budget allows), so under failurePolicy Fail an
// outage refuses it like any write of an offloaded workload.
func (v *WorkloadValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	gvk := schema.GroupVersionKind(req.Kind)
	newObject, ok := workloadKinds[gvk]
	if !ok {
		return admission.Errored(http.StatusBadRequest, wrongKind(workloadKindNames, gvk))
	}
	obj := newObject()
	if err := decodeObject(req, obj, gvk); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	name := req.Name
	m, err := apimeta.Accessor(obj)
	if err == nil {
		name = objectName(m)
	}
	unchanged := false
	if req.Operation == admissionv1.Update {
		if m != nil && m.GetDeletionTimestamp() != nil {
			return admission.Allowed("")
		}
		old := newObject()
		if err := decodeOldObject(req, old, gvk); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		unchanged = sameTemplate(old, obj)
	}
	// Every workload kind is judged: the template's pods, and the credentials they would
	// have copied, under the template's path.
	cfg, err := v.configs.Now(ctx, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	d, inTime := decideBy(ctx, len(req.Object.Raw), func() validate.Decision { d, _ := validate.Object(obj, cfg); return d })
	if !inTime {
		return tooLate(ctx)
	}
	if unchanged {
		d = unchangedTemplate(d)
	}
	return respond(gvk.GroupKind(), name, d)
}

// sameTemplate reports whether two objects of one workload kind hold the same pod template
// (a CronJob's spec.jobTemplate.spec.template), as the API server compares objects: a
// quantity written 1000m is the same as 1.
func sameTemplate(old, obj runtime.Object) bool {
	a, _, okA := validate.PodTemplate(old)
	b, _, okB := validate.PodTemplate(obj)
	return okA && okB && equality.Semantic.DeepEqual(a, b)
}

// unchangedTemplate is the decision on an update that leaves the pod template as stored:
// admitted. Its errors become warnings, each saying what they mean now, so whoever scales a
// workload the policy has since turned against learns why its new pods are refused; its
// warnings were said when the template was written and are not repeated on every write the
// controllers make.
func unchangedTemplate(d validate.Decision) validate.Decision {
	var out validate.Decision
	for _, e := range d.Errors {
		out.Warnings = append(out.Warnings, e.Error()+"; this update is admitted as it leaves the pod template unchanged, "+
			"but the policy in force refuses the template, and every pod made from it, until the template is changed")
	}
	return out
}
