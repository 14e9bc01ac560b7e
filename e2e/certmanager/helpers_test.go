package certmanager

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

func mustKubectl(ctx context.Context, t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return cluster.kubectl.MustRun(ctx, t, stdin, args...)
}

// eventually is harness.Eventually, failing with the end of cert-manager's log as well.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return harness.Eventually(t, timeout, what, cond, func() string { return cluster.cmProc.Tail(20) })
}

// secret reads a Secret of shadowgate's namespace.
func secret(ctx context.Context, t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s, err := cluster.kube.CoreV1().Secrets(certs.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// servedCertificate is the certificate serve presents on port, verified as the API server
// verifies it: for the Service's name, against caPEM.
func servedCertificate(port int, caPEM []byte) (*x509.Certificate, error) {
	return harness.ServedCertificate(port, caPEM, certs.ServiceName+"."+certs.Namespace+".svc")
}

// parseCertificate reads the first certificate of a PEM tls.crt.
func parseCertificate(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatalf("no PEM certificate: %q", certPEM)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
