package metrics_test

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/interlink-hq/shadowgate/internal/metrics"
)

// shadowgate_build_info is 1, labelled with what the binary was built from.
func TestBuildInfoSaysWhatWasBuilt(t *testing.T) {
	want := `
# HELP shadowgate_build_info Always 1, labelled with what this binary was built from: version, revision (the commit, or unknown) and go_version.
# TYPE shadowgate_build_info gauge
shadowgate_build_info{go_version="` + runtime.Version() + `",revision="abc123",version="v1.2.3"} 1
`
	if err := testutil.CollectAndCompare(metrics.BuildInfo("v1.2.3", "abc123"), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// The serving certificate's expiry is read at each scrape: absent while no certificate is
// served, then the notAfter of the one served, and a rotated one's from the next scrape.
func TestServingCertificateExpiryFollowsTheCertificateServed(t *testing.T) {
	var notAfter time.Time
	c := metrics.ServingCertificate(func() (time.Time, bool) { return notAfter, !notAfter.IsZero() })
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("%d series before a certificate is served, want none", n)
	}
	for _, at := range []time.Time{time.Unix(1900000000, 0), time.Unix(1950000000, 0)} {
		notAfter = at
		if got := testutil.ToFloat64(c); got != float64(at.Unix()) {
			t.Errorf("shadowgate_serving_certificate_expiry_timestamp_seconds is %v, want %d", got, at.Unix())
		}
	}
}

// The time-to-Ready histogram has a series for each node of the policy before a tunnel is
// Ready, and none for a node the policy no longer has.
func TestTheReadyHistogramFollowsThePolicysNodes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	series := func() []string {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, f := range families {
			if f.GetName() == "shadowgate_tunnel_ready_seconds" {
				for _, s := range f.GetMetric() {
					nodes = append(nodes, s.GetLabel()[0].GetValue())
				}
			}
		}
		slices.Sort(nodes)
		return nodes
	}
	m.ForNodes([]string{"hpc-vk", "gpu-vk"})
	if got := series(); !slices.Equal(got, []string{"gpu-vk", "hpc-vk"}) {
		t.Errorf("series for nodes %q, want gpu-vk and hpc-vk", got)
	}
	m.TunnelReadySeconds.WithLabelValues("hpc-vk").Observe(30)
	m.ForNodes([]string{"hpc-vk"})
	if got := series(); !slices.Equal(got, []string{"hpc-vk"}) {
		t.Errorf("series for nodes %q after gpu-vk left the policy, want hpc-vk alone", got)
	}
}
