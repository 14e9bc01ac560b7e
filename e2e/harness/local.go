package harness

import (
	"fmt"
	"net"
	"net/url"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// There is no kubelet or kube-proxy: an installed Deployment never runs and its Service
// routes nowhere. An install that keeps its webhooks' service references (the chart, the
// cert-manager overlay) is served by a local serve instead, reached through these two changes
// alone. The API server still resolves the webhooks' Service and verifies the serving
// certificate for <service>.<namespace>.svc against the webhooks' caBundle. A webhook with a
// clientConfig.url keeps its host and is called at the local serve's port.

// localService is svc as an ExternalName Service for localhost.
func localService(svc *unstructured.Unstructured) *unstructured.Unstructured {
	svc = svc.DeepCopy()
	svc.Object["spec"] = map[string]any{"type": "ExternalName", "externalName": "localhost"}
	return svc
}

// callServiceAt sets each webhook's clientConfig.service.port to port, the local serve's, or
// the port of its clientConfig.url.
func callServiceAt(configs []*unstructured.Unstructured, port int) error {
	for _, o := range configs {
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			if raw, ok, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "url"); ok {
				u, err := url.Parse(raw)
				if err != nil {
					return fmt.Errorf("webhook clientConfig.url %q: %w", raw, err)
				}
				u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
				if err := unstructured.SetNestedField(h.(map[string]any), u.String(), "clientConfig", "url"); err != nil {
					return err
				}
				continue
			}
			if err := unstructured.SetNestedField(h.(map[string]any), int64(port), "clientConfig", "service", "port"); err != nil {
				return err
			}
		}
		_ = unstructured.SetNestedSlice(o.Object, hooks, "webhooks") // hooks came from there
	}
	return nil
}
