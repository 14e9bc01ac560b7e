package validate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// PolicyRef names the policy ConfigMap. An empty Namespace matches any namespace, as the
// offline CLI does not know where the webhook runs.
type PolicyRef struct {
	Namespace, Name string
}

// Is reports whether cm is the policy ConfigMap.
func (r PolicyRef) Is(cm *corev1.ConfigMap) bool {
	return cm.Name == r.Name && (r.Namespace == "" || cm.Namespace == r.Namespace)
}

// Object judges any object shadowgate admits: Pods, pod templates of workloads, node
// ConfigMaps and the policy ConfigMap, under the credential rules the webhook runs with.
// judged is false for anything else. The webhook's handlers and `shadowgate check` both decide
// through here.
func Object(obj runtime.Object, pol *policy.Policy, ref PolicyRef, rules CredentialRules) (d Decision, judged bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		off, d := Pod(o, pol)
		d.Errors = append(d.Errors, rules.SecretInPodNamespace(off, o.Namespace, PodPaths)...)
		return d, true
	case *corev1.ConfigMap:
		return ConfigMap(o, ref, rules), true
	}
	tmpl, at, ok := PodTemplate(obj)
	if !ok {
		return Decision{}, false
	}
	// The template is judged as the pods it will create, reporting under its own path.
	namespace := objectNamespace(obj)
	paths := Paths{Meta: at.Child("metadata"), Spec: at.Child("spec"), Template: true}
	off, d := PodSpec(&tmpl.ObjectMeta, &tmpl.Spec, namespace, pol, paths)
	d.Errors = append(d.Errors, rules.SecretInPodNamespace(off, namespace, paths)...)
	return d, true
}

// ConfigMap judges a ConfigMap: the policy ConfigMap's document, and whether the rules can
// carry it out; a node ConfigMap's compute node; any other ConfigMap is admitted.
func ConfigMap(cm *corev1.ConfigMap, ref PolicyRef, rules CredentialRules) Decision {
	if ref.Is(cm) {
		_, errs := rules.PolicyConfigMap(cm)
		return Decision{Errors: errs}
	}
	if IsNodeConfigMap(cm) {
		return NodeConfigMap(cm)
	}
	return Decision{}
}

func objectNamespace(obj runtime.Object) string {
	if o, ok := obj.(interface{ GetNamespace() string }); ok {
		return o.GetNamespace()
	}
	return ""
}
