package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSelfSignedVerifiesForEveryHost(t *testing.T) {
	now := time.Now()
	b, err := SelfSigned([]string{"127.0.0.1", "shadowgate.shadowgate-system.svc"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(b.CA) {
		t.Fatal("CA PEM does not parse")
	}
	for _, host := range []string{"127.0.0.1", "shadowgate.shadowgate-system.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("does not verify for %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.2", Roots: roots, CurrentTime: now}); err == nil {
		t.Error("verifies for a host it was not issued for")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: roots, CurrentTime: now.Add(2 * time.Hour)}); err == nil {
		t.Error("still valid after validFor")
	}
}

func TestSelfSignedNeedsAHost(t *testing.T) {
	if _, err := SelfSigned(nil, time.Now(), time.Hour); err == nil {
		t.Fatal("issued a serving certificate for no host")
	}
}

func TestWriteDirIsLoadableAndKeepsTheKeyPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	b, err := SelfSigned([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)); err != nil {
		t.Fatalf("written pair does not load: %v", err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("dir holds %d entries, want ca.crt, tls.crt, tls.key only", len(entries))
	}
}
