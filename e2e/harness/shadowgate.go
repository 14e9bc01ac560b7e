package harness

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/interlink-hq/shadowgate/certs"
)

// The kustomize overlay for shadowgate running on this machine, and the policy installed with it.
const (
	DevOverlay    = "manifests/overlays/dev"
	ExamplePolicy = "manifests/examples/policy.yaml"
)

// ServeOptions configure the local `shadowgate serve`.
type ServeOptions struct {
	Bin         string        // the shadowgate binary
	Dir         string        // its certificates and log
	Port        int           // webhook port; 0 picks a free one
	GracePeriod time.Duration // --shadow-grace-period
	// Certs is served instead of a fresh self-signed certificate for 127.0.0.1 (the chart's).
	Certs *certs.Bundle
	// CertDir, when set, is serve's --cert-dir, kept by someone else (a secret volume, see
	// CertManager.StartSecretVolume): nothing is written there, and Certs is ignored.
	CertDir string
	// Kubeconfig is whom serve runs as; empty for the ServiceAccount the control plane's
	// token file names (ControlPlane.ShadowgateKubeconfig).
	Kubeconfig string
	// Args are more serve flags (the chart's container args), given before the harness's own,
	// which take precedence: they must parse, and the ones the harness does not set apply.
	Args []string
}

// Shadowgate is `shadowgate serve` on loopback, installed into a ControlPlane from the dev
// overlay of manifests/.
type Shadowgate struct {
	Port, MetricsPort, ProbePort int
	CertDir                      string
	CA                           []byte // the CA of the certificate being served
	Log                          string

	kubectl  Kubectl
	webhooks []*unstructured.Unstructured // the overlay's webhook configurations, as rendered
	proc     *process
	// How serve was started, so Restart starts it as it was.
	bin  string
	args []string
}

// Install renders the dev overlay with kubectl kustomize, applies all of it but the webhook
// configurations (namespace, RBAC, credentials) and the example policy, starts shadowgate serve as the
// ServiceAccount the RBAC binds, waits until it is ready, and then registers the webhooks,
// pointed at its port with its CA. The webhooks go last: registered before shadowgate serves,
// they would leave the example policy unjudged (its webhook is failurePolicy: Ignore) and
// refuse every offloaded pod and node ConfigMap until it does (failurePolicy: Fail).
func Install(ctx context.Context, root string, k Kubectl, cp *ControlPlane, opts ServeOptions) (*Shadowgate, error) {
	rendered, err := k.Must(ctx, "", "kustomize", filepath.Join(root, DevOverlay))
	if err != nil {
		return nil, err
	}
	objs, err := decodeAll(rendered)
	if err != nil {
		return nil, fmt.Errorf("reading kubectl kustomize %s: %w", DevOverlay, err)
	}
	var webhooks, rest []*unstructured.Unstructured
	for _, o := range objs {
		if strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			webhooks = append(webhooks, o)
		} else {
			rest = append(rest, o)
		}
	}
	if len(webhooks) == 0 {
		return nil, fmt.Errorf("%s renders no webhook configuration", DevOverlay)
	}
	if err := applyObjects(ctx, k, rest); err != nil {
		return nil, err
	}
	if _, err := k.Must(ctx, "", "apply", "--server-side", "--field-manager=e2e-install", "-f", filepath.Join(root, ExamplePolicy)); err != nil {
		return nil, err
	}
	s, err := Serve(k, cp, opts)
	if err != nil {
		return nil, err
	}
	s.webhooks = webhooks
	if err := s.InstallWebhooks(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// Serve starts shadowgate serve with its certificates and log under opts.Dir and returns once
// it is ready. It registers no webhooks: a second replica is started this way.
func Serve(k Kubectl, cp *ControlPlane, opts ServeOptions) (*Shadowgate, error) {
	s, err := StartServe(k, cp, opts)
	if err != nil {
		return nil, err
	}
	// Readiness waits for the policy and the caches: minutes, not seconds, on loaded cores.
	if err := s.WaitReady(2 * time.Minute); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// StartServe is Serve without waiting for /readyz: for a serve that has no certificate yet.
func StartServe(k Kubectl, cp *ControlPlane, opts ServeOptions) (*Shadowgate, error) {
	s := &Shadowgate{kubectl: k, CertDir: filepath.Join(opts.Dir, "certs"), Log: filepath.Join(opts.Dir, "shadowgate.log")}
	if opts.CertDir != "" {
		s.CertDir = opts.CertDir
	}
	if err := s.start(cp, opts); err != nil {
		if s.proc != nil {
			_ = s.Stop()
		}
		return nil, err
	}
	return s, nil
}

func (s *Shadowgate) start(cp *ControlPlane, opts ServeOptions) error {
	var err error
	if s.Port = opts.Port; s.Port == 0 {
		if s.Port, err = freePort(); err != nil {
			return err
		}
	}
	if s.MetricsPort, err = freePort(); err != nil {
		return err
	}
	if s.ProbePort, err = freePort(); err != nil {
		return err
	}
	switch {
	case opts.CertDir != "": // the caller keeps it
	case opts.Certs != nil:
		err = opts.Certs.WriteDir(s.CertDir)
		s.CA = opts.Certs.CA
	default:
		_, err = s.RotateCerts()
	}
	if err != nil {
		return err
	}
	args := append(append([]string{"serve"}, opts.Args...),
		"--kubeconfig", cmp.Or(opts.Kubeconfig, cp.ShadowgateKubeconfig),
		"--cert-dir", s.CertDir,
		"--bind-address", "127.0.0.1",
		"--port", strconv.Itoa(s.Port),
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(s.MetricsPort),
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(s.ProbePort),
		"--namespace", "shadowgate-system",
		"--shadow-grace-period", opts.GracePeriod.String(),
		"--log-format", "console")
	s.bin, s.args = opts.Bin, args
	s.proc, err = startProcess("shadowgate serve", s.Log, opts.Bin, args...)
	return err
}

// Restart starts serve again once it has exited (Stop, Kill), as the kubelet restarts a
// container: the same flags, ports and certificate directory, the log appended to. It
// returns once serve is ready.
func (s *Shadowgate) Restart() error {
	if s.proc.exitedErr() == nil {
		return fmt.Errorf("shadowgate serve on port %d is still running", s.Port)
	}
	var err error
	if s.proc, err = startProcess("shadowgate serve", s.Log, s.bin, s.args...); err == nil {
		err = s.WaitReady(2 * time.Minute)
	}
	if err != nil {
		// The ports were free when serve first started; another process may have taken one
		// since it exited, which a fresh start would not run into.
		return fmt.Errorf("restarting shadowgate serve on the ports it had (webhook %d, metrics %d, probes %d; one may have been taken since it exited): %w",
			s.Port, s.MetricsPort, s.ProbePort, err)
	}
	return nil
}

// Kill ends serve with SIGKILL, as a crash or the OOM killer would: admissions in flight are
// cut off.
func (s *Shadowgate) Kill() { s.proc.kill() }

// WaitReady polls /readyz until it answers 200, serve exits, or timeout passes.
func (s *Shadowgate) WaitReady(timeout time.Duration) error {
	return poll(s.proc, timeout, func() error {
		code, body, err := s.Probe("/readyz")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("/readyz %d: %s", code, body)
		}
		return err
	})
}

// RotateCerts writes a new CA and serving certificate into the cert directory, as a
// certificate manager would, and returns the new CA.
func (s *Shadowgate) RotateCerts() ([]byte, error) {
	b, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Now(), 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := b.WriteDir(s.CertDir); err != nil {
		return nil, err
	}
	s.CA = b.CA
	return b.CA, nil
}

// InstallWebhooks applies the overlay's webhook configurations with the current CA as
// caBundle and the serving port in each url, then waits until the API server calls them.
func (s *Shadowgate) InstallWebhooks(ctx context.Context) error {
	return s.InstallWebhooksAt(ctx, s.Port)
}

// InstallWebhooksAt is InstallWebhooks with port in each url instead of serve's own: a load
// balancer's in front of replicas serving the same certificate (see Balancer).
func (s *Shadowgate) InstallWebhooksAt(ctx context.Context, port int) error {
	var objs []*unstructured.Unstructured
	for _, o := range s.webhooks {
		o = o.DeepCopy()
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for i, h := range hooks {
			hook := h.(map[string]any)
			raw, _, _ := unstructured.NestedString(hook, "clientConfig", "url")
			u, err := url.Parse(raw)
			if err != nil || raw == "" {
				return fmt.Errorf("%s: webhook %d has no clientConfig.url in %s", o.GetName(), i, DevOverlay)
			}
			u.Host = "127.0.0.1:" + strconv.Itoa(port)
			hook["clientConfig"] = map[string]any{"url": u.String(), "caBundle": base64.StdEncoding.EncodeToString(s.CA)}
		}
		if err := unstructured.SetNestedSlice(o.Object, hooks, "webhooks"); err != nil {
			return err
		}
		objs = append(objs, o)
	}
	if err := applyObjects(ctx, s.kubectl, objs); err != nil {
		return err
	}
	return s.waitCalled(ctx)
}

// waitCalled returns once the API server sends pods to /validate-pods.
func (s *Shadowgate) waitCalled(ctx context.Context) error {
	return s.waitWebhooks(ctx, true, "the API server does not call shadowgate since its webhooks were registered")
}

// waitWebhooks polls until the API server calls shadowgate (called) or no longer does: a
// server-side dry run of a pod with a reverse annotation, on no virtual node, comes back with
// shadowgate's warning while it does. The API server learns of a change to the webhook
// configurations from a watch, a moment after it is stored. It waits as long as ctx allows,
// or two minutes when ctx sets no deadline (make dev's, the benchmark's).
func (s *Shadowgate) waitWebhooks(ctx context.Context, called bool, timeoutMsg string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	const probe = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"webhook-probe","namespace":"default",` +
		`"annotations":{"interlink.eu/reverse-forwards":"probe:1"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
	for {
		r := s.kubectl.Run(ctx, probe, "create", "--dry-run=server", "-f", "-")
		if r.Err == nil && called == strings.Contains(r.Stderr, "Warning: metadata.annotations[interlink.eu/reverse-forwards] is ignored") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s (%v); kubectl printed: %s", timeoutMsg, ctx.Err(), r.Output())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RemoveWebhooks deletes the webhook configurations, leaving shadowgate running, and returns
// once the API server no longer calls it.
func (s *Shadowgate) RemoveWebhooks(ctx context.Context) error {
	for _, o := range s.webhooks {
		if _, err := s.kubectl.Must(ctx, "", "delete", strings.ToLower(o.GetKind()), o.GetName(), "--ignore-not-found"); err != nil {
			return err
		}
	}
	return s.waitWebhooks(ctx, false, "the API server still calls shadowgate since its webhooks were deleted")
}

// Probe GETs a path (/readyz, /healthz) of the health probe endpoint.
func (s *Shadowgate) Probe(path string) (int, string, error) {
	return get("http://127.0.0.1:" + strconv.Itoa(s.ProbePort) + path)
}

// Metrics returns the text of the metrics endpoint.
func (s *Shadowgate) Metrics() (string, error) {
	code, body, err := get("http://127.0.0.1:" + strconv.Itoa(s.MetricsPort) + "/metrics")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("/metrics: %d", code)
	}
	return body, err
}

// Stop sends SIGTERM and waits for a clean exit: in-flight admissions finish first. It waits
// as long as the kubelet would, the Deployment's terminationGracePeriodSeconds (50 s), then
// kills.
func (s *Shadowgate) Stop() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.stop(50 * time.Second)
}

// Done is closed when shadowgate serve has exited.
func (s *Shadowgate) Done() <-chan struct{} { return s.proc.done }

// Exited reports an error naming the end of the log if shadowgate is no longer running.
func (s *Shadowgate) Exited() error { return s.proc.exitedErr() }

func applyObjects(ctx context.Context, k Kubectl, objs []*unstructured.Unstructured) error {
	items := make([]any, 0, len(objs))
	for _, o := range objs {
		items = append(items, o.Object)
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	if _, err = k.Must(ctx, string(list), "apply", "--server-side", "--field-manager=e2e-install", "-f", "-"); err != nil {
		return err
	}
	// A CRD serves its resource once Established; shadowgate's caches watch it from the start.
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			if _, err := k.Must(ctx, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/"+o.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeAll(yamlDocs string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(yamlDocs), 4096)
	var objs []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
}

func get(u string) (int, string, error) {
	// Generous: a probe or a metrics scrape can take seconds on loaded cores, and a slow answer
	// is not what the tests look for.
	c := &http.Client{Timeout: 15 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, err = io.Copy(&body, io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, body.String(), err
}
