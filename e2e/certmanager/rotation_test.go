package certmanager

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// A renewal with a new key, twice (five times at full scale), while clients (2, 8 at full
// scale) create offloaded pods without pause and another opens TLS connections to serve as
// the API server does: serve presents each new certificate soon after cert-manager writes it
// (within seconds here; the wait allows a minute), with the same process, and not one pod
// create or handshake fails on the way.
func TestRenewalIsServedWithoutRestartOrFailedAdmission(t *testing.T) {
	ctx := harness.TestContext(t, 6*time.Minute)
	mustKubectl(ctx, t, "", "create", "namespace", "rotation")
	creators := harness.Scaled(2, 8)
	load := startLoad(t, "rotation", secret(ctx, t, certs.ServingSecretName).Data["ca.crt"], creators)

	rounds := harness.Scaled(2, 5)
	for round := 1; round <= rounds; round++ {
		before := secret(ctx, t, certs.ServingSecretName)
		old := parseCertificate(t, before.Data["tls.crt"])
		renew(ctx, t)
		var renewed []byte
		took := eventually(t, 30*time.Second, "cert-manager writes a renewed certificate", func() (bool, string) {
			renewed = secret(ctx, t, certs.ServingSecretName).Data["tls.crt"]
			return !bytes.Equal(renewed, before.Data["tls.crt"]), "serial " + old.SerialNumber.String()
		})
		cert := parseCertificate(t, renewed)
		if bytes.Equal(cert.RawSubjectPublicKeyInfo, old.RawSubjectPublicKeyInfo) {
			t.Errorf("round %d: the renewed certificate has the old key (rotationPolicy: Always)", round)
		}
		caPEM := before.Data["ca.crt"]
		served := eventually(t, time.Minute, "serve presents the renewed certificate", func() (bool, string) {
			got, err := servedCertificate(cluster.sg.Port, caPEM)
			if err != nil {
				return false, err.Error()
			}
			return got.Equal(cert), "serving serial " + got.SerialNumber.String()
		})
		t.Logf("round %d: cert-manager renewed serial %s -> %s in %s; served %s after it was written",
			round, old.SerialNumber, cert.SerialNumber, took.Round(time.Millisecond), served.Round(time.Millisecond))
		// Admissions and handshakes go on with the new certificate before the next round.
		from := load.created()
		eventually(t, 30*time.Second, "pods are admitted after the switch", func() (bool, string) {
			return load.created() >= from+3, fmt.Sprint(load.created()-from, " since")
		})
	}
	tried, created, handshakes, serials, failures := load.stop()
	t.Logf("during the renewals: %d pods created, %d handshakes presenting %d certificates", created, handshakes, serials)
	for _, err := range failures {
		t.Errorf("failed during the renewals: %v", err)
	}
	if serials != rounds+1 {
		t.Errorf("the handshakes saw %d certificates, want the first and %d renewals", serials, rounds)
	}
	// Nothing here restarts serve: had it exited, it would still be gone.
	if err := cluster.sg.Exited(); err != nil {
		t.Fatalf("serve exited during the renewals: %v", err)
	}
	bundles, err := webhookBundles(ctx, cluster.kube)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range bundles {
		if _, err := servedCertificate(cluster.sg.Port, b); err != nil {
			t.Errorf("%s: the served certificate does not verify against the caBundle: %v", name, err)
		}
	}
	harness.Scenario("serving-secret-rotation", "renewals", rounds, "create_clients", creators, "admissions_tried", tried, "admissions_failed", tried-created,
		"handshakes", handshakes, "certificates_served", serials, "failures", len(failures))
}

// renew asks cert-manager to reissue the serving Certificate now, as `cmctl renew` does: it
// sets the Issuing condition, with the reason and message cmctl gives, through the status
// subresource. (cmctl's helper, cert-manager's pkg/api/util, would add dependencies to this
// module for one condition.)
func renew(ctx context.Context, t *testing.T) {
	t.Helper()
	key := types.NamespacedName{Namespace: certs.Namespace, Name: certs.ServingCertificateName}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var crt cmapi.Certificate
		if err := cluster.client.Get(ctx, key, &crt); err != nil {
			return err
		}
		issuing := cmapi.CertificateCondition{
			Type:               cmapi.CertificateConditionIssuing,
			Status:             cmmeta.ConditionTrue,
			Reason:             "ManuallyTriggered",
			Message:            "Certificate re-issuance manually triggered",
			LastTransitionTime: &metav1.Time{Time: time.Now()},
			ObservedGeneration: crt.Generation,
		}
		conds := crt.Status.Conditions[:0]
		for _, c := range crt.Status.Conditions {
			if c.Type != cmapi.CertificateConditionIssuing {
				conds = append(conds, c)
			}
		}
		crt.Status.Conditions = append(conds, issuing)
		return cluster.client.Status().Update(ctx, &crt)
	})
	if err != nil {
		t.Fatal(err)
	}
}
