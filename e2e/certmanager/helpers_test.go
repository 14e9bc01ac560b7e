package certmanager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/certs"
)

// testContext ends after timeout or with the test.
func testContext(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func mustKubectl(ctx context.Context, t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := cluster.kubectl.Must(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventually polls cond every 100ms until it holds or timeout passes, then fails naming what
// was awaited, cond's last report and the end of cert-manager's log. It returns how long it took.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, last := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s; last: %s\n%s", what, timeout, last, cluster.cmProc.Tail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no PEM certificate in the CA: %q", caPEM)
	}
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{
		RootCAs:    roots,
		ServerName: certs.ServiceName + "." + certs.Namespace + ".svc",
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
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
