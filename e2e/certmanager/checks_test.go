package certmanager

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/interlink-hq/shadowgate/certs"
)

// webhookBundles reads the caBundle of every webhook of both shadowgate webhook
// configurations, by "mutating NAME" or "validating NAME".
func webhookBundles(ctx context.Context, client kubernetes.Interface) (map[string][]byte, error) {
	got := map[string][]byte{}
	m, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "shadowgate", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for _, w := range m.Webhooks {
		got["mutating "+w.Name] = w.ClientConfig.CABundle
	}
	v, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "shadowgate", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for _, w := range v.Webhooks {
		got["validating "+w.Name] = w.ClientConfig.CABundle
	}
	return got, nil
}

// verifyServing checks that certPEM verifies against caPEM as a server certificate for the
// name the API server dials: <Service>.<Namespace>.svc.
func verifyServing(t *testing.T, caPEM, certPEM []byte) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.crt holds no PEM certificate: %q", caPEM)
	}
	leaf := parseCertificate(t, certPEM)
	dnsName := certs.ServiceName + "." + certs.Namespace + ".svc"
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: dnsName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate does not verify for %s against its CA: %v", dnsName, err)
	}
}

func describeBundles(got map[string][]byte, want []byte) string {
	var b bytes.Buffer
	for name, bundle := range got {
		state := "the serving CA"
		switch {
		case len(bundle) == 0:
			state = "empty"
		case !bytes.Equal(bundle, want):
			state = "another CA"
		}
		fmt.Fprintf(&b, "  %s: %s\n", name, state)
	}
	return b.String()
}
