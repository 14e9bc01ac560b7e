// Package drift owns what shadowgate says on an offloaded pod about its shadow against the
// policy in force: the interlink.eu/shadow-drift annotation, absent while the shadow is
// current, which the reconciler writes (webhook's Reconciler) and `shadowgate status` reads.
// It is pure.
package drift
