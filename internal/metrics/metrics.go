package metrics

import (
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/interlink-hq/shadowgate/internal/drift"
)

// Metrics are shadowgate's own, the admission handlers' and the controllers', served beside
// controller-runtime's and serving's decision count on the metrics endpoint.
type Metrics struct {
	ApplySeconds  *prometheus.HistogramVec
	PolicyReloads *prometheus.CounterVec
	// PolicyStoredInForce is the policy store's: 0 while the stored policy ConfigMap is
	// invalid or deleted and the last valid one is served.
	PolicyStoredInForce prometheus.Gauge
	// Tunnels, TunnelTransitions and TunnelReadySeconds are the tunnel reporter's.
	Tunnels            *prometheus.GaugeVec
	TunnelTransitions  *prometheus.CounterVec
	TunnelReadySeconds *prometheus.HistogramVec
	// Unconfirmed and UnconfirmedRefusals are the admission bound's (webhook's unconfirmedShadows).
	Unconfirmed         prometheus.Gauge
	UnconfirmedRefusals prometheus.Counter
	Collected           *prometheus.CounterVec
	CopiesFollowed      *prometheus.CounterVec
	// ShadowsDrifted and ShadowRolls are the reconciler's (its rollPacer).
	ShadowsDrifted *prometheus.GaugeVec
	ShadowRolls    *prometheus.CounterVec

	// readyNodes are the nodes TunnelReadySeconds has a series for before any observation.
	readyNodes   map[string]bool
	readyNodesMu sync.Mutex
}

// ForNodes gives TunnelReadySeconds a series, empty until a tunnel is Ready, for each virtual
// node of the policy in force, and drops those of nodes no longer in it: a rate over the
// histogram starts from zero, and the label set stays the policy's.
func (m *Metrics) ForNodes(nodes []string) {
	m.readyNodesMu.Lock()
	defer m.readyNodesMu.Unlock()
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
		if !m.readyNodes[n] {
			m.TunnelReadySeconds.WithLabelValues(n)
		}
	}
	for n := range m.readyNodes {
		if !want[n] {
			m.TunnelReadySeconds.DeleteLabelValues(n)
		}
	}
	m.readyNodes = want
}

// Label values.
const (
	ReloadValid   = "valid"
	ReloadInvalid = "invalid"
	ReloadDeleted = "deleted"

	FollowCreated = "created"
	FollowUpdated = "updated"
	FollowRefused = "refused"

	RolledRestarted = "restarted"
	RolledInPlace   = "in-place"
	RolledStalled   = "stalled"

	// NodeUnknown is the node label of a tunnel whose pod no virtual node of the policy in
	// force takes: the node label's values are the policy's node names and this one.
	NodeUnknown = "unknown"
	// TransitionFromNone is the from label of a tunnel's first state.
	TransitionFromNone = "None"
)

// New creates the metrics and registers them with reg (controller-runtime's
// metrics.Registry when serving).
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		ApplySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shadowgate_shadow_apply_duration_seconds",
			Help:    "Time to server-side apply one pod's shadow, by result (ok, error) and whether the request was a dry run.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"result", "dry_run"}),
		PolicyReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shadowgate_policy_reloads_total",
			Help: "Policy ConfigMap changes seen by result: valid (now served), invalid (last valid kept), deleted (last valid kept).",
		}, []string{"result"}),
	}
	m.PolicyStoredInForce = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shadowgate_policy_stored_in_force",
		Help: "1 when the policy ConfigMap as stored is the policy in force; 0 while it is invalid or deleted and the last valid policy is still served.",
	})
	m.Tunnels = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "shadowgate_tunnels",
		Help: "Offloaded pods' tunnels by the state the tunnel reporter last saw (Starting, WaitingForNode, Ready, Failed, Ended), its reason (the fixed catalogue of tunnel reasons, empty while Starting) and virtual node (a node of the policy, or unknown): a bounded label set, each series removed once it counts no tunnel.",
	}, []string{"node", "state", "reason"})
	m.TunnelTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shadowgate_tunnel_transitions_total",
		Help: "Tunnels' changes of state by virtual node (a node of the policy, or unknown), from (a state, or None for a tunnel's first) and to (a state): a bounded label set.",
	}, []string{"node", "from", "to"})
	m.TunnelReadySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "shadowgate_tunnel_ready_seconds",
		Help:    "Time from an offloaded pod's creation (its admission) to its tunnel's first Ready, by virtual node (a node of the policy, or unknown): queueing in Slurm included.",
		Buckets: []float64{5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600},
	}, []string{"node"})
	m.Unconfirmed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shadowgate_unconfirmed_shadows",
		Help: "Shadows this replica applied at admission for pods the API server has not stored yet (bounded by --max-unconfirmed-shadows).",
	})
	m.UnconfirmedRefusals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shadowgate_unconfirmed_shadow_refusals_total",
		Help: "Admissions refused because --max-unconfirmed-shadows shadows, or a namespace's --max-unconfirmed-shadows-per-namespace, were waiting for their pods: pods refused after admission (a ResourceQuota), or reviews that no pod follows reaching the webhook.",
	})
	m.Collected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shadowgate_collected_total",
		Help: "What the collector deleted because no shadow used it, by kind: Namespace (a shadow namespace shadowgate created), Secret or ConfigMap (a credential copy it created).",
	}, []string{"kind"})
	for _, kind := range []string{"Namespace", "Secret", "ConfigMap"} {
		m.Collected.WithLabelValues(kind) // exported at 0 from the start
	}
	m.CopiesFollowed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shadowgate_credential_copies_followed_total",
		Help: "Credential copies the follower brought to their source's content, by kind (Secret, ConfigMap) and result: updated, created (made again once a copy that could not follow was deleted), refused (it cannot follow: a Warning Event CopyNotFollowing on the source says why).",
	}, []string{"kind", "result"})
	for _, kind := range []string{"Secret", "ConfigMap"} {
		for _, result := range []string{FollowCreated, FollowUpdated, FollowRefused} {
			m.CopiesFollowed.WithLabelValues(kind, result)
		}
	}
	m.ShadowsDrifted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "shadowgate_shadows_drifted",
		Help: "Shadows that do not match what the policy in force renders, by state: OutOfDate (waiting for their turn to roll), Rolling (their shadow pod is being replaced), Refused (the policy in force would refuse the pod, or gives it no shadow: left as they are).",
	}, []string{"state"})
	for _, state := range []drift.State{drift.OutOfDate, drift.Rolling, drift.Refused} {
		m.ShadowsDrifted.WithLabelValues(string(state))
	}
	m.ShadowRolls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shadowgate_shadow_rolls_total",
		Help: "Shadows applied again because the policy in force renders them differently, by result: restarted (the pod template changed and the shadow pod was replaced), in-place (only the Service, NetworkPolicy or the Deployment's metadata changed), stalled (the shadow pod was not replaced within 10 minutes: the roll gave up its slot).",
	}, []string{"result"})
	for _, result := range []string{RolledRestarted, RolledInPlace, RolledStalled} {
		m.ShadowRolls.WithLabelValues(result)
	}
	for _, c := range []prometheus.Collector{m.ApplySeconds, m.PolicyReloads, m.PolicyStoredInForce, m.Tunnels, m.TunnelTransitions, m.TunnelReadySeconds, m.Unconfirmed, m.UnconfirmedRefusals, m.Collected, m.CopiesFollowed, m.ShadowsDrifted, m.ShadowRolls} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// BuildInfo is shadowgate_build_info, always 1, labelled with the binary's version, the commit
// it was built from and its Go version: one series per process.
func BuildInfo(version, revision string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "shadowgate_build_info",
		Help:        "Always 1, labelled with what this binary was built from: version, revision (the commit, or unknown) and go_version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "go_version": runtime.Version()},
	})
	g.Set(1)
	return g
}

// ServingCertificate is shadowgate_serving_certificate_expiry_timestamp_seconds, the notAfter
// of the certificate the webhook serves, which notAfter reads at each scrape: a rotated
// certificate's is exported from the next scrape, and none while no certificate is served.
func ServingCertificate(notAfter func() (time.Time, bool)) prometheus.Collector {
	return &servingCertificate{notAfter: notAfter, desc: prometheus.NewDesc(
		"shadowgate_serving_certificate_expiry_timestamp_seconds",
		"When the certificate the webhook serves expires (its notAfter), in seconds since the epoch; absent while no certificate is served.",
		nil, nil)}
}

type servingCertificate struct {
	desc     *prometheus.Desc
	notAfter func() (time.Time, bool)
}

func (s *servingCertificate) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *servingCertificate) Collect(ch chan<- prometheus.Metric) {
	if t, ok := s.notAfter(); ok {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(t.Unix()))
	}
}
