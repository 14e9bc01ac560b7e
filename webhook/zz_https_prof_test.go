package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/e2e/bench"
)

func BenchmarkZZHTTPS(b *testing.B) {
	mut, podV, _, _, _ := handlers(b)
	dir := b.TempDir()
	bundle, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	if err := bundle.WriteDir(dir); err != nil {
		b.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir, TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}})
	srv.Register(PathMutatePods, withCallDeadline(&reviewServer{newWebhook(mut), func() runtime.Object { return &corev1.Pod{} }}))
	srv.Register(PathValidatePods, withCallDeadline(&reviewServer{newWebhook(podV), func() runtime.Object { return &corev1.Pod{} }}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Start(ctx)
	time.Sleep(500 * time.Millisecond)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle.CA)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: 8}}
	mk := func(path string, obj any) (string, []byte) {
		raw, _ := json.Marshal(obj)
		body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
			"request": map[string]any{"uid": "x", "kind": podGVK, "resource": map[string]string{"version": "v1", "resource": "pods"}, "namespace": "user", "operation": "CREATE", "userInfo": map[string]any{"username": "a"}, "object": json.RawMessage(raw)}})
		return "https://127.0.0.1:" + strconv.Itoa(port) + path + "?timeout=5s", body
	}
	mu, mb := mk(PathMutatePods, bench.TypicalPod("trainer", "user", true, true))
	vu, vb := mk(PathValidatePods, bench.TypicalPod("notebook", "user", false, false))
	send := func(u string, body []byte) {
		resp, err := client.Post(u, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.Status)
		}
	}
	b.ReportAllocs()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(0, &ru0)
	defer func() {
		syscall.Getrusage(0, &ru1)
		cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano())
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			send(mu, mb)
			send(vu, vb)
		}
	})
	_ = admissionv1.AdmissionReview{}
}
