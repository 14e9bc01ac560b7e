// Package metrics holds the metrics of shadowgate's own that `shadowgate serve` exports beside
// controller-runtime's and internal/serving's decision count: one set, registered once, which
// the admission handlers, the applier, the policy store and each controller update, and the
// process's own (BuildInfo, ServingCertificate). Every label takes a bounded set of values.
//
// Its tests hold the monitoring bundle (manifests/components/monitoring and the chart's
// monitoring values, docs/monitoring.md) to these metrics: the alerts fire as designed under
// promtool, and every query of the alerts and the dashboard reads a metric registered here, or
// one of the API server's, by labels it has.
//
// It may import internal/drift and the Prometheus client.
package metrics
