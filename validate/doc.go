// Package validate decides, without any cluster, whether an object is admitted and why not:
// pure functions from an object and a Config (the policy in force, where the policy ConfigMap
// lives, the credential rules of serve's flags) to a field.ErrorList and warnings, every error
// collected. It owns every rule: the pod's annotations and placement (Pod, PodSpec), workload
// templates and ConfigMaps (Object), and the policy's own (Policy, ParsePolicy,
// PolicyConfigMap). The webhook, the reconciler and `shadowgate check` decide through here.
//
// It may import Kubernetes API types, validate/policy and validate/syntax; never the network.
package validate
