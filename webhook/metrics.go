package webhook

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/interlink-hq/shadowgate/internal/drift"
)

// Metrics are the webhook's own, served beside controller-runtime's and serving's decision
// count on the metrics endpoint.
type Metrics struct {
	applySeconds  *prometheus.HistogramVec
	policyReloads *prometheus.CounterVec
	tunnels       *prometheus.GaugeVec
	// unconfirmed and unconfirmedRefusals are the admission bound's (unconfirmedShadows).
	unconfirmed         prometheus.Gauge
	unconfirmedRefusals prometheus.Counter
	collected           *prometheus.CounterVec
	copiesFollowed      *prometheus.CounterVec
	// shadowsDrifted and shadowRolls are the reconciler's (rollPacer).
	shadowsDrifted *prometheus.GaugeVec
	shadowRolls    *prometheus.CounterVec
}

// Label values.
const (
	reloadValid   = "valid"
	reloadInvalid = "invalid"
	reloadDeleted = "deleted"

	followCreated = "created"
	followUpdated = "updated"
	followRefused = "refused"

	rolledRestarted = "restarted"
	rolledInPlace   = "in-place"
	rolledStalled   = "stalled"
)

// NewMetrics creates the metrics and registers them with reg (controller-runtime's
// metrics.Registry when serving).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		applySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shadowgate_shadow_apply_duration_seconds",
			Help:    "Time to server-side apply one pod's shadow, by result (ok, error) and whether the request was a dry run.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"result", "dry_run"}),
		policyReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shadowgate_policy_reloads_total",
			Help: "Policy ConfigMap changes seen by result: valid (now served), invalid (last valid kept), deleted (last valid kept).",
		}, []string{"result"}),
	}
	m.tunnels = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "shadowgate_tunnels",
		Help: "Offloaded pods' tunnels by the state the tunnel reporter last saw: Starting, WaitingForNode, Ready, Failed.",
	}, []string{"state"})
	m.unconfirmed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shadowgate_unconfirmed_shadows",
		Help: "Shadows this replica applied at admission for pods the API server has not stored yet (bounded by --max-unconfirmed-shadows).",
	})
	m.unconfirmedRefusals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shadowgate_unconfirmed_shadow_refusals_total",
		Help: "Admissions refused because --max-unconfirmed-shadows shadows, or a namespace's --max-unconfirmed-shadows-per-namespace, were waiting for their pods: pods refused after admission (a ResourceQuota), or reviews that no pod follows reaching the webhook.",
	})
	m.collected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shadowgate_collected_total",
		Help: "What the collector deleted because no shadow used it, by kind: Namespace (a shadow namespace shadowgate created), Secret or ConfigMap (a credential copy it created).",
	}, []string{"kind"})
	for _, kind := range []string{"Namespace", "Secret", "ConfigMap"} {
		m.collected.WithLabelValues(kind) // exported at 0 from the start
	}
	m.copiesFollowed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shadowgate_credential_copies_followed_total",
		Help: "Credential copies the follower brought to their source's content, by kind (Secret, ConfigMap) and result: updated, created (made again once a copy that could not follow was deleted), refused (it cannot follow: a Warning Event CopyNotFollowing on the source says why).",
	}, []string{"kind", "result"})
	for _, kind := range []string{"Secret", "ConfigMap"} {
		for _, result := range []string{followCreated, followUpdated, followRefused} {
			m.copiesFollowed.WithLabelValues(kind, result)
		}
	}
	m.shadowsDrifted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "shadowgate_shadows_drifted",
		Help: "Shadows that do not match what the policy in force renders, by state: OutOfDate (waiting for their turn to roll), Rolling (their shadow pod is being replaced), Refused (the policy in force would refuse the pod, or gives it no shadow: left as they are).",
	}, []string{"state"})
	for _, state := range []drift.State{drift.OutOfDate, drift.Rolling, drift.Refused} {
		m.shadowsDrifted.WithLabelValues(string(state))
	}
	m.shadowRolls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shadowgate_shadow_rolls_total",
		Help: "Shadows applied again because the policy in force renders them differently, by result: restarted (the pod template changed and the shadow pod was replaced), in-place (only the Service, NetworkPolicy or the Deployment's metadata changed), stalled (the shadow pod was not replaced within 10 minutes: the roll gave up its slot).",
	}, []string{"result"})
	for _, result := range []string{rolledRestarted, rolledInPlace, rolledStalled} {
		m.shadowRolls.WithLabelValues(result)
	}
	for _, c := range []prometheus.Collector{m.applySeconds, m.policyReloads, m.tunnels, m.unconfirmed, m.unconfirmedRefusals, m.collected, m.copiesFollowed, m.shadowsDrifted, m.shadowRolls} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
