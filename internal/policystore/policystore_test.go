package policystore

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// The informer hands the stored version over again on every relist and resync. An invalid
// version is said once, in the metric, the log and a Warning Event, not again at each relist;
// the next invalid version is said again, and a valid one is loaded as before.
func TestInvalidPolicyIsReportedOncePerVersion(t *testing.T) {
	valid := shadowtest.ExamplePolicyConfigMap(t, shadowtest.Unchanged)
	pol, errs := validate.PolicyConfigMap(valid, validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	reloads := func(result string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, metric := range f.GetMetric() {
				for _, l := range metric.GetLabel() {
					if f.GetName() == "shadowgate_policy_reloads_total" && l.GetName() == "result" && l.GetValue() == result {
						return metric.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	recorder := &shadowtest.RecordingEvents{}
	s := &PolicyStore{recorder: recorder, metrics: m, log: logr.Discard()}
	s.current.Store(&loadedPolicy{policy: pol, resourceVersion: "1"})
	version := func(cm *corev1.ConfigMap, rv string) *corev1.ConfigMap {
		cm = cm.DeepCopy()
		cm.ResourceVersion = rv
		return cm
	}
	invalid := shadowtest.ExamplePolicyConfigMap(t, func(string) string { return "{" })
	inForce := func(step string, want float64) {
		t.Helper()
		if got := testutil.ToFloat64(m.PolicyStoredInForce); got != want {
			t.Errorf("%s: shadowgate_policy_stored_in_force is %v, want %v", step, got, want)
		}
	}
	check := func(step string, wantInvalid, wantValid float64, wantServing string, wantInForce float64) {
		t.Helper()
		inForce(step, wantInForce)
		if got := reloads(metrics.ReloadInvalid); got != wantInvalid {
			t.Errorf("%s: %v invalid reloads counted, want %v", step, got, wantInvalid)
		}
		if got := reloads(metrics.ReloadValid); got != wantValid {
			t.Errorf("%s: %v valid reloads counted, want %v", step, got, wantValid)
		}
		if got := len(recorder.Reasons); got != int(wantInvalid) {
			t.Errorf("%s: %d Events %q, want %v", step, got, recorder.Reasons, wantInvalid)
		}
		if got := s.current.Load().resourceVersion; got != wantServing {
			t.Errorf("%s: serving resourceVersion %s, want %s", step, got, wantServing)
		}
	}
	s.load(version(invalid, "2"))
	check("an invalid version", 1, 0, "1", 0)
	s.load(version(invalid, "2"))
	s.load(version(invalid, "2"))
	check("the same invalid version after two relists", 1, 0, "1", 0)
	s.load(version(invalid, "3"))
	check("another invalid version", 2, 0, "1", 0)
	s.load(version(valid, "4"))
	s.load(version(valid, "4"))
	check("a valid version, relisted", 2, 1, "4", 1)
	s.load(version(invalid, "5"))
	s.load(version(invalid, "5"))
	check("an invalid version after a valid one, relisted", 3, 1, "4", 0)
	s.load(version(valid, "6"))
	inForce("a valid version after an invalid one", 1)
	s.deleted(version(valid, "6"))
	inForce("the ConfigMap deleted", 0)
}
