// Package policy is the cluster admin's per-virtual-node configuration: the same Network block
// a site already has in the virtual kubelet's VirtualKubeletConfig.yaml, keyed by virtual
// node. It owns the type, its defaults and its strict decoding (unknown keys and wrong types
// refused with their path); the rules on the values are validate.Policy's. It lives below
// validate so that validate and inject can both use the type without a cycle.
//
// It may import Kubernetes API types only.
package policy
