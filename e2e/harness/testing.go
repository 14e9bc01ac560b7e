package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apitypes "k8s.io/apimachinery/pkg/types"
)

// Eventually polls cond every 200ms until it holds or timeout passes, then fails naming what
// was awaited, cond's last report and whatever explain adds (a log's end, say). It returns
// how long it took.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string), explain ...func() string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, last := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			msg := fmt.Sprintf("%s: not within %s; last: %s", what, timeout, last)
			for _, e := range explain {
				msg += "\n" + e()
			}
			t.Fatal(msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// MustRun runs kubectl and returns stdout, failing t with what kubectl printed if it fails.
func (k Kubectl) MustRun(ctx context.Context, t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := k.Must(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CreateNamespaces creates namespaces for a test with kubectl, failing it if one cannot be.
func (k Kubectl) CreateNamespaces(ctx context.Context, t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		k.MustRun(ctx, t, "", "create", "namespace", n)
	}
}

// ServedCertificate is the leaf certificate presented on 127.0.0.1:port. Given caPEM it is
// verified as the API server verifies it, for serverName against caPEM; without, it is only
// read, for the caller to compare or verify.
func ServedCertificate(port int, caPEM []byte, serverName string) (*x509.Certificate, error) {
	cfg := &tls.Config{InsecureSkipVerify: true} // only read: the caller verifies
	if caPEM != nil {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("no PEM certificate in the CA: %q", caPEM)
		}
		cfg = &tls.Config{RootCAs: roots, ServerName: serverName}
	}
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// PodCreateReview is the AdmissionReview the API server sends for the CREATE of pod (its JSON).
func PodCreateReview(uid, namespace, name string, pod []byte) []byte {
	return CreateReview(uid, metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, namespace, name, pod)
}

// CreateReview is the AdmissionReview the API server sends for the CREATE of an object of
// kind (its JSON, sent as is, however malformed: it is put in after marshalling, which would
// refuse what is not JSON, or nested too deep).
func CreateReview(uid string, kind metav1.GroupVersionKind, namespace, name string, object []byte) []byte {
	const placeholder = `"object placeholder"`
	b, _ := json.Marshal(admissionv1.AdmissionReview{ // a typed review always marshals
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: apitypes.UID(uid), Operation: admissionv1.Create, Namespace: namespace, Name: name,
			Kind: kind, Object: runtime.RawExtension{Raw: []byte(placeholder)}},
	})
	return bytes.Replace(b, []byte(placeholder), object, 1)
}

// Review POSTs body to path on this serve as the API server does, trusting its CA and passing
// timeout as the API server's timeout parameter, and returns the AdmissionResponse it answers.
func (s *Shadowgate) Review(path string, timeout time.Duration, contentType string, body []byte) (*admissionv1.AdmissionResponse, error) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.CA)
	// A little longer than the webhook's own deadline, so its answer, not the client's
	// timeout, is what a slow admission ends in.
	hc := &http.Client{Timeout: timeout + 5*time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	// Each call has a transport of its own: an idle connection left in it would hold a
	// goroutine in serve until its idle timeout, and a count of serve's goroutines would
	// take the client's leak for serve's.
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("https://127.0.0.1:"+strconv.Itoa(s.Port)+path+"?timeout="+timeout.String(), contentType, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		return nil, fmt.Errorf("no AdmissionReview back (%v, HTTP %s)", err, resp.Status)
	}
	return out.Response, nil
}

// GrepLines are the lines of text that hold s: what a failure shows of a long output, such as
// a metrics page.
func GrepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
