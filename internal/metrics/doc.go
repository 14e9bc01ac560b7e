// Package metrics holds the metrics of shadowgate's own that `shadowgate serve` exports beside
// controller-runtime's and internal/serving's decision count: one set, registered once, which
// the admission handlers, the applier, the policy store and each controller update.
//
// It may import internal/drift and the Prometheus client.
package metrics
