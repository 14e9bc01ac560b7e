package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/internal/freeport"
)

// clientCA is a CA that signs client certificates, as a cluster admin makes one for the API
// server's webhook calls.
type clientCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newClientCA(t *testing.T) *clientCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook client CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &clientCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client signs a client certificate, as the API server's kubeConfigFile for webhook admission
// would hold it.
func (ca *clientCA) client(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startWebhookServer starts serve's webhook server as serve builds it, on a free loopback
// port with a self-signed serving certificate, and returns its URL and the CA that signed it.
func startWebhookServer(t *testing.T, o serveOptions) (url string, servingCA *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	bundle, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := bundle.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	// controller-runtime's server binds the port it is given (0 means its default, 9443).
	o.host = "127.0.0.1"
	if o.port, err = freeport.Port(o.host); err != nil {
		t.Fatal(err)
	}
	serving := certs.NewServing(dir, nil, logr.Discard())
	clientCA, err := o.clientCA(logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	srv := o.webhookServer(serving, clientCA)
	srv.Register("/validate-pods", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	ctx, cancel := context.WithCancel(context.Background())
	runnables := []interface{ Start(context.Context) error }{serving, srv}
	if clientCA != nil {
		runnables = append(runnables, clientCA)
	}
	done := make(chan error, len(runnables))
	for _, r := range runnables {
		go func() { done <- r.Start(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range runnables {
			if err := <-done; err != nil {
				t.Errorf("stopping: %v", err)
			}
		}
	})
	servingCA = x509.NewCertPool()
	servingCA.AppendCertsFromPEM(bundle.CA)
	url = fmt.Sprintf("https://127.0.0.1:%d/validate-pods", o.port)
	deadline := time.Now().Add(10 * time.Second)
	for serving.Check(nil) != nil || srv.StartedChecker()(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook server did not start: %v, %v", serving.Check(nil), srv.StartedChecker()(nil))
		}
		select {
		case err := <-done:
			done <- err // for the cleanup, which collects both results
			t.Fatalf("the webhook server stopped at start: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return url, servingCA
}

// post calls the server with cert as client certificate (none when nil) and returns the
// status, or the error of a refused handshake.
func post(url string, servingCA *x509.CertPool, cert *tls.Certificate) (int, error) {
	cfg := &tls.Config{RootCAs: servingCA, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := c.Post(url, "application/json", nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// With --client-ca-file only a client whose certificate that CA signed gets an answer: a
// caller without one, or with one of another CA, is refused in the TLS handshake, before any
// request is read. Without the flag every client is answered, as before.
func TestClientCAFileAdmitsOnlyItsClients(t *testing.T) {
	ca, other := newClientCA(t), newClientCA(t)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	apiserver, stranger := ca.client(t), other.client(t)

	url, servingCA := startWebhookServer(t, serveOptions{clientCAFile: caFile})
	for name, c := range map[string]struct {
		cert     *tls.Certificate
		answered bool
	}{
		"a caller without a client certificate is refused in the handshake":  {nil, false},
		"a client certificate of another CA is refused in the handshake":     {&stranger, false},
		"the API server's client certificate, signed by the CA, is answered": {&apiserver, true},
	} {
		code, err := post(url, servingCA, c.cert)
		if answered := err == nil && code == http.StatusOK; answered != c.answered {
			t.Errorf("%s: status %d, error %v", name, code, err)
		}
	}

	open, servingCA := startWebhookServer(t, serveOptions{})
	if code, err := post(open, servingCA, nil); err != nil || code != http.StatusOK {
		t.Errorf("without --client-ca-file a caller without a certificate is not answered: status %d, error %v", code, err)
	}
}

// A file that holds no certificate is a startup error naming the flag, not a server that
// requires certificates no CA can sign.
func TestClientCAFileWithoutACertificateIsAnError(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := serveOptions{clientCAFile: caFile}
	_, err := o.clientCA(logr.Discard())
	want := "--client-ca-file: " + caFile + " holds no PEM certificate: give the CA that signed the API server's webhook client certificate"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// A new bundle written to the file (as a ConfigMap update reaches its volume) is in force
// within a few seconds, without a restart: the new CA's clients are answered and the old
// one's are refused in the handshake, on fresh connections.
func TestClientCAFileIsReloadedWithoutARestart(t *testing.T) {
	old, rotated := newClientCA(t), newClientCA(t)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, old.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	before, after := old.client(t), rotated.client(t)
	url, servingCA := startWebhookServer(t, serveOptions{clientCAFile: caFile})
	if code, err := post(url, servingCA, &before); err != nil || code != http.StatusOK {
		t.Fatalf("before the rotation the old CA's client is not answered: status %d, error %v", code, err)
	}
	tmp := caFile + ".new"
	if err := os.WriteFile(tmp, rotated.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, caFile); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, err := post(url, servingCA, &after)
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new CA's client is still not answered 15s after the rotation: status %d, error %v", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := post(url, servingCA, &before); err == nil {
		t.Error("after the rotation the old CA's client is still answered")
	}
}
