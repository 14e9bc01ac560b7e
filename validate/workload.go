package validate

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var templatePath = field.NewPath("spec", "template")

// PodTemplate returns the pod template of a workload and where it sits in the object, or
// false when obj is not one of the workloads shadowgate judges.
func PodTemplate(obj runtime.Object) (*corev1.PodTemplateSpec, *field.Path, bool) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return &w.Spec.Template, templatePath, true
	case *appsv1.StatefulSet:
		return &w.Spec.Template, templatePath, true
	case *appsv1.DaemonSet:
		return &w.Spec.Template, templatePath, true
	case *appsv1.ReplicaSet:
		return &w.Spec.Template, templatePath, true
	case *batchv1.Job:
		return &w.Spec.Template, templatePath, true
	case *batchv1.CronJob:
		return &w.Spec.JobTemplate.Spec.Template, field.NewPath("spec", "jobTemplate", "spec", "template"), true
	}
	return nil, nil, false
}
