package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/interlink-hq/shadowgate/e2e/bench"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// call is one admission request as the API server sends it: the endpoint and the
// AdmissionReview body, and whether the answer must carry a patch.
type call struct {
	path      string
	body      []byte
	wantPatch bool
}

// httpsLoad drives `shadowgate serve`'s webhook server over HTTPS with keep-alive, as the API
// server does (HTTP/1.1, a pool of reused connections, ?timeout= on every URL).
type httpsLoad struct {
	base   string
	client *http.Client
	pid    int
}

func newHTTPSLoad(port int, ca []byte, pid, conns int) *httpsLoad {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	return &httpsLoad{
		base: "https://127.0.0.1:" + strconv.Itoa(port),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			DisableCompression:  true,
		}},
		pid: pid,
	}
}

// The admissions measured over HTTPS, as the API server calls for one pod create. validate:
// /validate-pods for an offloaded pod that needs no shadow (the whole decision, nothing
// applied). mutate-validate: /mutate-pods then /validate-pods for the typical offloaded pod,
// which the mutator leaves alone. mutate-validate-reverse: the same for a pod asking for the
// reverse tunnel, whose mutation records a bind address and prepends the 18 KB snippet, sent
// back as a patch. None applies a shadow: that is the API server's work, measured through it.
type admissionKind struct {
	name  string
	calls []call
}

func admissionKinds() ([]admissionKind, error) {
	validate, err := review("/validate-pods", bench.TypicalPod("notebook", "bench", false, false), false)
	if err != nil {
		return nil, err
	}
	mutate, err := review("/mutate-pods", bench.TypicalPod("notebook", "bench", true, false), false)
	if err != nil {
		return nil, err
	}
	mutateReverse, err := review("/mutate-pods", bench.TypicalPod("trainer", "bench", true, true), true)
	if err != nil {
		return nil, err
	}
	return []admissionKind{
		{"validate", []call{validate}},
		{"mutate-validate", []call{mutate, validate}},
		{"mutate-validate-reverse", []call{mutateReverse, validate}},
	}, nil
}

func review(path string, obj runtime.Object, wantPatch bool) (call, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return call{}, err
	}
	pods := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	podKind := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("3f0e8a52-5d3b-4c39-a1f4-0c5d8f7b2e61"), Kind: podKind, Resource: pods,
			RequestKind: &podKind, RequestResource: &pods,
			Name: "notebook", Namespace: "bench", Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
			Object:   runtime.RawExtension{Raw: raw},
			Options:  runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
			DryRun:   new(bool),
		},
	})
	return call{path: path + "?timeout=5s", body: body, wantPatch: wantPatch}, err
}

// check sends each call once and verifies the answer: admitted, patched when it should be.
func (l *httpsLoad) check(ctx context.Context, calls []call) error {
	for _, c := range calls {
		body, err := l.send(ctx, c)
		if err != nil {
			return err
		}
		var ar admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &ar); err != nil || ar.Response == nil {
			return fmt.Errorf("%s: not an AdmissionReview (%v): %s", c.path, err, body)
		}
		if !ar.Response.Allowed || (len(ar.Response.Patch) > 0) != c.wantPatch {
			return fmt.Errorf("%s: allowed %v with a patch of %d bytes, want allowed and a patch: %v; %+v",
				c.path, ar.Response.Allowed, len(ar.Response.Patch), c.wantPatch, ar.Response.Result)
		}
	}
	return nil
}

func (l *httpsLoad) send(ctx context.Context, c call) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.base+c.path, bytes.NewReader(c.body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err
	}
	// Read to the end, or the connection is not reused.
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s: %s", c.path, resp.Status, body)
	}
	return body, err
}

// throughput runs workers closed loops, each sending the calls in turn, for d, and returns
// the admissions (one pass over calls) completed, the wall time, and the CPU time shadowgate
// spent: admissions per CPU-second are admissions per second per core.
func (l *httpsLoad) throughput(ctx context.Context, calls []call, workers int, d time.Duration) (int64, time.Duration, time.Duration, error) {
	cpu0, err := bench.ProcessCPU(l.pid)
	if err != nil {
		return 0, 0, 0, err
	}
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				for _, c := range calls {
					if _, err := l.send(ctx, c); err != nil {
						once.Do(func() { firstErr = err })
						return
					}
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	cpu1, err := bench.ProcessCPU(l.pid)
	return done.Load(), wall, cpu1 - cpu0, errors.Join(firstErr, err)
}

// fixedRate sends rate calls per second (taking calls in turn) for d, each on its own
// schedule whether or not earlier ones have been answered, and returns each call's latency
// from when it was due, so a stall counts against every call it delays.
func (l *httpsLoad) fixedRate(ctx context.Context, calls []call, rate int, d time.Duration) ([]time.Duration, error) {
	n := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	latencies := make([]time.Duration, n)
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		wg.Go(func() {
			if _, err := l.send(ctx, calls[i%len(calls)]); err != nil {
				once.Do(func() { firstErr = err })
			}
			latencies[i] = time.Since(due)
		})
	}
	wg.Wait()
	return latencies, firstErr
}

// runHTTPS measures the webhook server alone: admissions per second per core with workers
// closed loops, then latency at a fixed offered load of rate requests per second, the kinds
// alternating in rounds. The server's own histogram tells its handling time from the time a
// request waited for a CPU on a busy machine.
func runHTTPS(ctx context.Context, l *httpsLoad, sg *harness.Shadowgate, r *bench.Report, rounds, rate, workers int, d time.Duration) error {
	kinds, err := admissionKinds()
	if err != nil {
		return err
	}
	for _, k := range kinds {
		if err := l.check(ctx, k.calls); err != nil {
			return err
		}
		// Warm the connections and the server before measuring.
		if _, _, _, err := l.throughput(ctx, k.calls, workers, time.Second); err != nil {
			return err
		}
	}
	type totals struct {
		admissions int64
		wall, cpu  time.Duration
		latencies  []time.Duration
		served     serverLatency
	}
	got := map[string]*totals{}
	for round := range rounds {
		for i := range kinds {
			k := kinds[i]
			if round%2 == 1 {
				k = kinds[len(kinds)-1-i]
			}
			t := got[k.name]
			if t == nil {
				t = &totals{}
				got[k.name] = t
			}
			n, wall, cpu, err := l.throughput(ctx, k.calls, workers, d)
			if err != nil {
				return err
			}
			t.admissions, t.wall, t.cpu = t.admissions+n, t.wall+wall, t.cpu+cpu
			before, err := scrapeLatency(sg)
			if err != nil {
				return err
			}
			lat, err := l.fixedRate(ctx, k.calls, rate, d)
			if err != nil {
				return err
			}
			after, err := scrapeLatency(sg)
			if err != nil {
				return err
			}
			t.latencies = append(t.latencies, lat...)
			t.served = t.served.plus(after.plus(before, -1), 1)
		}
	}
	for _, k := range kinds {
		t := got[k.name]
		requests := float64(t.admissions) * float64(len(k.calls))
		perCore := requests / t.cpu.Seconds()
		r.Figure("https-"+k.name+"-requests-per-core-second", perCore, "req/s/core")
		r.Figure("https-"+k.name+"-requests-per-second", requests/t.wall.Seconds(), "req/s")
		r.Figure("https-"+k.name+"-shadowgate-cpu", t.cpu.Seconds()/t.wall.Seconds(), "cores")
		at := "-at-" + strconv.Itoa(rate) + "rps"
		p50, p99 := bench.Percentile(t.latencies, 50), bench.Percentile(t.latencies, 99)
		r.Duration("https-"+k.name+"-p50"+at, p50)
		r.Duration("https-"+k.name+"-p99"+at, p99)
		r.Figure("https-"+k.name+"-served-within-1ms"+at, t.served.share(0), "%")
		r.Figure("https-"+k.name+"-served-within-10ms"+at, t.served.share(1), "%")
		if k.name == "validate" {
			continue
		}
		pod := "typical pod"
		if k.name == "mutate-validate-reverse" {
			pod = "pod asking for the reverse tunnel"
		}
		r.Target("HTTPS >= 4,000 mutate+validate requests/s per core, "+pod, fmt.Sprintf("%.0f req/s/core", perCore), perCore >= 4000)
		r.Target("HTTPS p99 <= 5 ms at 1,000 requests/s, "+pod, fmt.Sprintf("p99 %s, p50 %s; served within 1 ms: %.1f%%, 10 ms: %.1f%%",
			p99.Round(10*time.Microsecond), p50.Round(10*time.Microsecond), t.served.share(0), t.served.share(1)), p99 <= 5*time.Millisecond)
	}
	return nil
}
