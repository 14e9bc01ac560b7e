package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Serving is the webhook server's certificate, read from a directory that a mounted Secret
// fills. Until tls.crt and tls.key are there and load, it is not ready and says why, rather
// than failing the server with a file-not-found; from then on controller-runtime's certwatcher
// serves them and reloads them when they change. The kubelet updates a mounted Secret by
// swapping the ..data symlink and removing the old files, which the certwatcher sees as the
// removal of the files it watches: it watches the new ones and reads them at once. It also
// re-reads them every waitInterval, so a change whose event is missed (one that lands before
// its watches are added) is served within a second, not controller-runtime's default 10.
type Serving struct {
	dir     string
	explain func(context.Context) string
	log     logr.Logger

	watcher atomic.Pointer[certwatcher.CertWatcher]
	mu      sync.Mutex
	waiting string // why there is no certificate yet; guarded by mu
}

// waitInterval is how often Serving looks for the files while they are missing or unusable.
const waitInterval = time.Second

// NewServing serves the certificate in dir. explain, when not nil, adds to the reason for
// waiting what the issuer of the files says (the cert-manager Certificate's condition).
func NewServing(dir string, explain func(context.Context) string, log logr.Logger) *Serving {
	s := &Serving{dir: dir, explain: explain, log: log}
	s.waiting = "the serving certificate has not been read yet from " + dir
	return s
}

// Start waits until the files load, then runs the certwatcher until ctx ends. It is a
// controller-runtime Runnable.
func (s *Serving) Start(ctx context.Context) error {
	tick := time.NewTicker(waitInterval)
	defer tick.Stop()
	for {
		w, err := certwatcher.New(filepath.Join(s.dir, CertFile), filepath.Join(s.dir, KeyFile))
		if err == nil {
			w = w.WithWatchInterval(waitInterval)
			s.watcher.Store(w)
			s.log.Info("serving certificate loaded", "dir", s.dir)
			return w.Start(ctx)
		}
		s.wait(ctx, err)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// NeedLeaderElection is false: every replica serves admissions.
func (s *Serving) NeedLeaderElection() bool { return false }

// GetCertificate is the webhook server's tls.Config.GetCertificate.
func (s *Serving) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if w := s.watcher.Load(); w != nil {
		return w.GetCertificate(hello)
	}
	return nil, s.Check(nil)
}

// Check is the readiness check: nil once a certificate is served, else why not.
func (s *Serving) Check(_ *http.Request) error {
	if s.watcher.Load() != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.New(s.waiting)
}

// wait records, and logs when it changes, why the files do not load.
func (s *Serving) wait(ctx context.Context, loadErr error) {
	reason := "no usable " + CertFile + " and " + KeyFile + " in " + s.dir + " (" + loadErr.Error() + ")"
	if s.explain != nil {
		reason += ": " + s.explain(ctx)
	}
	s.mu.Lock()
	changed := reason != s.waiting
	s.waiting = reason
	s.mu.Unlock()
	if changed {
		s.log.Info("waiting for the serving certificate; not ready until it is there", "reason", reason)
	}
}

// NotAfter is when the certificate served expires; false while none is served.
func (s *Serving) NotAfter() (time.Time, bool) {
	w := s.watcher.Load()
	if w == nil {
		return time.Time{}, false
	}
	cert, err := w.GetCertificate(nil)
	if err != nil || cert == nil || len(cert.Certificate) == 0 {
		return time.Time{}, false
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return time.Time{}, false
		}
	}
	return leaf.NotAfter, true
}
