// Package shadows is the one rule of identity every controller calls (DESIGN.md "Identity"): a
// pod's shadow objects are those at the namespace and names shadowgate derives from the pod, in
// a namespace carrying the mark only shadowgate and the cluster admins can set, or, for a
// shadow beside its pod, in the pod's own namespace; a credential copy's place is such a shadow
// namespace, or a pod namespace where the policy in force gives a live pod a shadow beside it
// that mounts the copy. Identity answers these questions from the manager's cache (Objects,
// ShadowNamespaceFor, MayHoldCopy, HoldsCopies); labels and annotations a tenant can write only
// narrow what it looks at (the IndexShadowFor index, ListKinds), and never make an object one of
// shadowgate's.
//
// It may import inject, validate, internal/policystore and controller-runtime's client.
package shadows
