package validate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

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

// Config is what a decision depends on besides the object: the policy in force, where the
// policy ConfigMap lives, what this shadowgate may do with the site's credentials, and the
// labels of the object's namespace. The webhook builds one per request from the policy it
// serves, its flags and the namespace it reads once for the request; the CLI from --policy,
// the same flags and the Namespace objects among its input.
type Config struct {
	Policy      *policy.Policy
	PolicyRef   PolicyRef
	Credentials CredentialRules
	// NamespaceLabels are the labels of the namespace of the object judged, which a virtual
	// node's AllowedNamespaceSelector matches.
	NamespaceLabels map[string]string
}

// Object judges any object shadowgate admits: Pods, pod templates of workloads, node
// ConfigMaps and the policy ConfigMap. judged is false for anything else. The webhook's
// handlers and `shadowgate check` both decide through here.
func Object(obj runtime.Object, cfg Config) (d Decision, judged bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		_, d := Pod(o, cfg)
		return d, true
	case *corev1.ConfigMap:
		return ConfigMap(o, cfg), true
	}
	tmpl, at, ok := PodTemplate(obj)
	if !ok {
		return Decision{}, false
	}
	// The template is judged as the pods it will create, reporting under its own path.
	paths := Paths{Meta: at.Child("metadata"), Spec: at.Child("spec"), Template: true}
	_, d = judgePodSpec(&tmpl.ObjectMeta, &tmpl.Spec, objectNamespace(obj), cfg, paths)
	return d, true
}

// ConfigMap judges a ConfigMap: the policy ConfigMap's document, and whether the credential
// rules can carry it out; a node ConfigMap's compute node; any other ConfigMap is admitted.
func ConfigMap(cm *corev1.ConfigMap, cfg Config) Decision {
	if cfg.PolicyRef.Is(cm) {
		pol, errs := judgePolicyConfigMap(cm, cfg.Credentials)
		d := Decision{Errors: errs}
		if pol != nil {
			d.Warnings = PolicyWarnings(pol, field.NewPath("data").Key(policy.DataKey))
		}
		return d
	}
	if isNodeConfigMap(cm) {
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
