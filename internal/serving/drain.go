package serving

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// DrainingServer is the webhook server with a drain before its shutdown (NewDrainingServer). The API server
// keeps its connections to a webhook open between calls, and a Service only steers new
// connections away from a stopping replica. An idle connection the webhook server closes on
// shutdown may be the one the API server is writing its next call into at that moment: the
// call fails with EOF and the pod create with it (kubernetes/kubernetes#127335). While
// draining, every answer says "Connection: close", so a connection that carries a call during
// the drain is closed after its answer, by the server, cleanly, and the API server dials anew,
// reaching another replica.
//
// This narrows the race; it does not remove it. A connection that stays idle through the
// whole drain is still closed by the shutdown, and a call written into it at that instant
// still fails. Closing idle connections earlier would race the same way, and cannot be done
// here anyway: controller-runtime's webhook.Server builds its http.Server inside Start and
// exposes neither it (SetKeepAlivesEnabled) nor a connection hook.
//
// "Connection: close" ends the connection because serve speaks HTTP/1.1 only (the TLS
// NextProtos of webhookServer); HTTP/2 has no such header and would keep the connection.
type DrainingServer struct {
	ctrlwebhook.Server
	draining atomic.Bool
}

// NewDrainingServer wraps the manager's webhook server; hand the result to the manager in its
// place, and DrainThenStop the manager's context.
func NewDrainingServer(s ctrlwebhook.Server) *DrainingServer { return &DrainingServer{Server: s} }

// Register registers hook with its answer marked "Connection: close" when draining has begun
// by the time the answer's header is written, so a call already in flight at SIGTERM closes
// its connection as well.
func (s *DrainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hook.ServeHTTP(&closingWriter{ResponseWriter: w, draining: &s.draining}, r)
	}))
}

// closingWriter adds "Connection: close" to the answer if draining is set when its header is
// written.
type closingWriter struct {
	http.ResponseWriter
	draining    *atomic.Bool
	wroteHeader bool
}

func (w *closingWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if w.draining.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closingWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK) // what the ResponseWriter itself would do
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's own writer.
func (w *closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// NotDraining is a readiness check: a draining replica is not ready, so that whatever routes
// by readiness stops sending it new connections.
func (s *DrainingServer) NotDraining(*http.Request) error {
	if s.draining.Load() {
		return errors.New("shutting down: draining the webhook server's connections")
	}
	return nil
}

// DrainThenStop returns a context that ends delay after signalled does, and drains s in
// between. Once signalled, it calls stopSignals first, which must stop catching the signals
// (signal.NotifyContext's stop): a second SIGTERM or Ctrl-C then takes its default action and
// ends the process at once, instead of being swallowed through the drain and the shutdown.
func DrainThenStop(signalled context.Context, stopSignals func(), s *DrainingServer, delay time.Duration, log logr.Logger) context.Context {
	ctx, cancel := context.WithCancel(context.WithoutCancel(signalled))
	go func() {
		<-signalled.Done()
		stopSignals()
		s.draining.Store(true)
		log.Info("draining the webhook server's connections before shutting down; a second signal ends serve at once", "delay", delay)
		time.Sleep(delay)
		cancel()
	}()
	return ctx
}
