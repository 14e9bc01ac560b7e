// Package drift owns what shadowgate says about an offloaded pod's shadow against the policy in
// force: the shadow field of the pod's Tunnel (api/v1alpha1), which the reconciler writes and
// `shadowgate status` reads. It is pure.
package drift
