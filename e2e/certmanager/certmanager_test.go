package certmanager

import (
	"bytes"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// From the overlay to an injected caBundle: the issuers and Certificates reconciled by
// cert-manager, cainjector filling every webhook's caBundle with the CA that signed the
// serving certificate (the harness sets none), and serve serving that certificate.
func TestCertManagerIssuesAndInjects(t *testing.T) {
	ctx := harness.TestContext(t, time.Minute)
	mustKubectl(ctx, t, "", "wait", "--for=condition=Ready", "--timeout=30s", "-n", certs.Namespace,
		"certificate/"+certs.CACertificateName, "certificate/"+certs.ServingCertificateName)
	serving := secret(ctx, t, certs.ServingSecretName)
	caPEM := serving.Data["ca.crt"]
	if !bytes.Equal(caPEM, secret(ctx, t, certs.CASecretName).Data["tls.crt"]) {
		t.Errorf("%s ca.crt is not the certificate of %s", certs.ServingSecretName, certs.CASecretName)
	}
	verifyServing(t, caPEM, serving.Data["tls.crt"])

	bundles, err := webhookBundles(ctx, cluster.kube)
	if err != nil {
		t.Fatal(err)
	}
	if len(bundles) != 5 {
		t.Errorf("want the 5 webhooks of manifests/base, got %d:\n%s", len(bundles), describeBundles(bundles, caPEM))
	}
	for name, b := range bundles {
		if !bytes.Equal(b, caPEM) {
			t.Errorf("%s: caBundle is not the serving CA:\n%s", name, describeBundles(bundles, caPEM))
		}
	}

	served, err := servedCertificate(cluster.sg.Port, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served.Raw, parseCertificate(t, serving.Data["tls.crt"]).Raw) {
		t.Errorf("serve presents certificate serial %s, not the one in %s", served.SerialNumber, certs.ServingSecretName)
	}
}
