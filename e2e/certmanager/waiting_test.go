package certmanager

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// A serve whose Certificate cannot issue (its Issuer does not exist yet) starts, is not ready,
// and says which Certificate it waits for with that Certificate's Ready condition, in
// /readyz/serving-certificate and its log. Once the Issuer exists, the certificate is issued
// and the same process becomes ready and serves it.
func TestServeWaitsForItsCertificate(t *testing.T) {
	ctx := harness.TestContext(t, 2*time.Minute)
	const name = "shadowgate-pending"
	var crt *cmapi.Certificate
	var issuer *cmapi.Issuer
	for _, o := range certs.CertManagerObjects() {
		switch o := o.(type) {
		case *cmapi.Certificate:
			if o.Name == certs.ServingCertificateName {
				crt = o.DeepCopy()
			}
		case *cmapi.Issuer:
			if o.Name == certs.CAIssuerName {
				issuer = o.DeepCopy()
			}
		}
	}
	// The overlay's serving Certificate and CA Issuer, renamed: the Certificate names an
	// Issuer that is created last.
	crt.Name, crt.Spec.SecretName, crt.Spec.IssuerRef.Name = name, name+"-tls", name
	issuer.Name = name
	create(ctx, t, crt)

	dir := filepath.Join(cluster.dir, name)
	tlsDir := filepath.Join(dir, "tls")
	vol, err := cluster.cm.StartSecretVolume(cluster.cp, certs.Namespace, crt.Spec.SecretName, tlsDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(t, "the secret volume", vol.Stop) })
	s, err := harness.StartServe(cluster.kubectl, cluster.cp, harness.ServeOptions{
		Bin: cluster.bin, Dir: dir, CertDir: tlsDir, GracePeriod: gracePeriod,
		Args: []string{"--" + certs.CertificateFlag + "=" + name},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(t, "the second serve", s.Stop) })
	pid := s.PID()

	var ready *cmapi.CertificateCondition
	eventually(t, 30*time.Second, "cert-manager marks the Certificate not Ready", func() (bool, string) {
		var got cmapi.Certificate
		if err := cluster.client.Get(ctx, types.NamespacedName{Namespace: certs.Namespace, Name: name}, &got); err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == cmapi.CertificateConditionReady && c.Status == cmmeta.ConditionFalse {
				ready = &c
				return true, ""
			}
		}
		return false, "conditions " + fmtConditions(got.Status.Conditions)
	})
	want := []string{"cert-manager Certificate " + certs.Namespace + "/" + name, ready.Reason, ready.Message}
	var body string
	eventually(t, 15*time.Second, "serve names the Certificate and its Ready condition", func() (bool, string) {
		var code int
		var err error
		code, body, err = s.Probe("/readyz/serving-certificate")
		if err != nil || code != http.StatusInternalServerError {
			return false, body
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false, body
			}
		}
		return true, ""
	})
	t.Logf("/readyz/serving-certificate: %s", body)
	if code, body, err := s.Probe("/readyz"); err != nil || code != http.StatusInternalServerError || !strings.Contains(body, "[-]serving-certificate failed") {
		t.Errorf("/readyz while waiting: %d %v\n%s", code, err, body)
	}
	// serve records the reason /readyz/serving-certificate gives before it logs it
	// (certs.Serving.wait), so the line may trail the probe's answer a moment.
	eventually(t, 15*time.Second, "the log says what serve waits for", func() (bool, string) {
		log, err := os.ReadFile(s.Log)
		if err != nil || !strings.Contains(string(log), ready.Message) {
			return false, fmt.Sprintf("the log does not say what serve waits for (%v):\n%s", err, log)
		}
		return true, ""
	})
	if err := s.Exited(); err != nil {
		t.Fatal(err)
	}

	create(ctx, t, issuer)
	took := eventually(t, time.Minute, "serve becomes ready once the Certificate is issued", func() (bool, string) {
		code, body, err := s.Probe("/readyz")
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK, body
	})
	t.Logf("ready %s after the Issuer was created", took.Round(time.Millisecond))
	if s.PID() != pid {
		t.Errorf("serve was restarted: pid %d, was %d", s.PID(), pid)
	}
	issued := secret(ctx, t, crt.Spec.SecretName)
	served, err := servedCertificate(s.Port, issued.Data["ca.crt"])
	if err != nil {
		t.Fatal(err)
	}
	if !served.Equal(parseCertificate(t, issued.Data["tls.crt"])) {
		t.Errorf("serve presents serial %s, not the certificate of Secret %s", served.SerialNumber, crt.Spec.SecretName)
	}
}

// create stores o as the cluster admin and deletes it when the test ends.
func create(ctx context.Context, t *testing.T, o client.Object) {
	t.Helper()
	if err := cluster.client.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.client.Delete(context.Background(), o); err != nil {
			t.Errorf("deleting %s: %v", o.GetName(), err)
		}
	})
}

func stopProcess(t *testing.T, what string, stop func() error) {
	if err := stop(); err != nil {
		t.Errorf("stopping %s: %v", what, err)
	}
}

func fmtConditions(conds []cmapi.CertificateCondition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
