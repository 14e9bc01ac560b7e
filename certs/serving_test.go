package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

// Before the files exist serve is not ready and says why, with what explain adds; once they
// are written it serves them without a restart, and a replaced pair is served in turn.
func TestServingWaitsForTheFilesThenServesAndReloads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	s := NewServing(dir, func(context.Context) string { return "Certificate x is not Ready: pending" }, testr.New(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})

	waitFor(t, "the missing files to be reported", func() (bool, string) {
		err := s.Check(nil)
		return err != nil && strings.Contains(err.Error(), "no usable tls.crt and tls.key in "+dir) &&
			strings.HasSuffix(err.Error(), ": Certificate x is not Ready: pending"), errString(err)
	})
	if c, err := s.GetCertificate(&tls.ClientHelloInfo{}); err == nil || c != nil {
		t.Errorf("a handshake got certificate %v before there was one", c)
	}
	if at, ok := s.NotAfter(); ok {
		t.Errorf("NotAfter is %v before there is a certificate", at)
	}

	for i := range 2 {
		b, err := SelfSigned([]string{"127.0.0.1"}, time.Now(), time.Duration(i+1)*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
		want, err := tls.X509KeyPair(b.Cert, b.Key)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("written pair %d to be served", i), func() (bool, string) {
			c, err := s.GetCertificate(&tls.ClientHelloInfo{})
			return err == nil && c != nil && bytes.Equal(c.Certificate[0], want.Certificate[0]), errString(err)
		})
		if err := s.Check(nil); err != nil {
			t.Errorf("not ready while serving: %v", err)
		}
		// The metric of the serving certificate's expiry follows the pair served.
		if at, ok := s.NotAfter(); !ok || !at.Equal(want.Leaf.NotAfter) {
			t.Errorf("NotAfter of pair %d = %v, %v; want %v", i, at, ok, want.Leaf.NotAfter)
		}
	}
}

// A pair that does not load (a key of another certificate) is reported like missing files.
func TestServingReportsAPairThatDoesNotLoad(t *testing.T) {
	dir := t.TempDir()
	a, err := SelfSigned([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SelfSigned([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a.Key = b.Key
	if err := a.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	s := NewServing(dir, nil, testr.New(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Start(ctx) }()
	waitFor(t, "the mismatched pair to be reported", func() (bool, string) {
		err := s.Check(nil)
		return err != nil && strings.Contains(err.Error(), "private key does not match public key"), errString(err)
	})
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: last %s", what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
