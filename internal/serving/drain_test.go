package serving

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// testDelay is long enough to tell "drains, then stops" from "stops at once" when the test
// goroutine waits a second or more for a core.
const testDelay = 2 * time.Second

// newDrainingServer registers handler on /validate-pods of a draining server.
func newDrainingServer(handler http.HandlerFunc) *DrainingServer {
	s := &DrainingServer{Server: ctrlwebhook.NewServer(ctrlwebhook.Options{})}
	s.Register("/validate-pods", handler)
	return s
}

// answer is the recorded answer of s to one POST.
func answer(s *DrainingServer) *http.Response {
	w := httptest.NewRecorder()
	s.WebhookMux().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/validate-pods", nil))
	return w.Result()
}

// signalAndAwaitDrain ends signalled and returns once s reports not ready, failing if ctx
// (the manager's) ended first: the drain must come before the shutdown, not with it.
func signalAndAwaitDrain(t *testing.T, signal func(), s *DrainingServer, ctx context.Context) {
	t.Helper()
	signal()
	deadline := time.Now().Add(10 * time.Second)
	for {
		done := ctx.Err() != nil // read before readiness: done then draining would be no drain
		if s.NotDraining(nil) != nil {
			if done {
				t.Fatal("the manager's context ended before the replica reported not ready")
			}
			return
		}
		if done || time.Now().After(deadline) {
			t.Fatalf("not draining after SIGTERM (context done: %v)", done)
		}
		time.Sleep(time.Millisecond)
	}
}

// Once SIGTERM arrives, the signals stop being caught, answers close their connection and the
// replica reports not ready, while the manager's context, which nothing but the drain ends,
// goes on for the delay.
func TestDrainClosesEachConnectionAfterItsAnswerThenStops(t *testing.T) {
	s := newDrainingServer(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	if got := answer(s).Header.Get("Connection"); got != "" || s.NotDraining(nil) != nil {
		t.Fatalf("before SIGTERM: Connection %q, readiness %v", got, s.NotDraining(nil))
	}
	signalled, signal := context.WithCancel(context.Background())
	var stopped atomic.Int32
	ctx := DrainThenStop(signalled, func() { stopped.Add(1) }, s, testDelay, logr.Discard())
	if ctx.Err() != nil || stopped.Load() != 0 {
		t.Fatal("the manager's context ended, or the signals were released, before SIGTERM")
	}
	start := time.Now()
	signalAndAwaitDrain(t, signal, s, ctx)
	if got := answer(s).Header.Get("Connection"); got != "close" {
		t.Errorf("while draining: Connection %q, want close", got)
	}
	if stopped.Load() != 1 {
		t.Errorf("the signals were released %d times once SIGTERM arrived, want once", stopped.Load())
	}
	<-ctx.Done()
	if took := time.Since(start); took < testDelay {
		t.Errorf("the manager's context ended %s after SIGTERM, before the delay of %s", took, testDelay)
	}
}

// An admission in flight when SIGTERM arrives answers after the drain began: its answer
// closes its connection too.
func TestDrainClosesTheConnectionOfACallInFlightAtSIGTERM(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s := newDrainingServer(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		_, _ = w.Write([]byte(`{}`)) // no WriteHeader: the implicit 200 must be caught as well
	})
	signalled, signal := context.WithCancel(context.Background())
	ctx := DrainThenStop(signalled, func() {}, s, testDelay, logr.Discard())
	answered := make(chan *http.Response, 1)
	go func() { answered <- answer(s) }()
	<-entered
	signalAndAwaitDrain(t, signal, s, ctx)
	close(release)
	if got := (<-answered).Header.Get("Connection"); got != "close" {
		t.Errorf("a call in flight at SIGTERM answered with Connection %q, want close", got)
	}
}

// Over a real HTTP/1.1 connection: before SIGTERM a second call reuses the first's
// connection; while draining, the call after an answer dials a new one, which is what sends
// the API server's next call to a replica that is not stopping.
func TestDrainingMakesTheNextCallDialANewConnection(t *testing.T) {
	s := newDrainingServer(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	srv := httptest.NewServer(s.WebhookMux())
	t.Cleanup(srv.Close)
	client := srv.Client()
	post := func() (reused bool, closed bool) {
		t.Helper()
		var info httptrace.GotConnInfo
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { info = i }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/validate-pods", strings.NewReader(`{}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read to the end, so the connection can go back to the pool
		resp.Body.Close()
		return info.Reused, resp.Close
	}
	post()
	if reused, _ := post(); !reused {
		t.Fatal("before SIGTERM the second call did not reuse the first's connection: nothing below would show a difference")
	}
	signalled, signal := context.WithCancel(context.Background())
	ctx := DrainThenStop(signalled, func() {}, s, time.Minute, logr.Discard())
	signalAndAwaitDrain(t, signal, s, ctx)
	if _, closed := post(); !closed {
		t.Error("the answer while draining did not close its connection")
	}
	if reused, _ := post(); reused {
		t.Error("while draining, the next call reused a connection instead of dialling a new one")
	}
}
