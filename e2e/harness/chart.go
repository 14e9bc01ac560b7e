package harness

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/interlink-hq/shadowgate/certs"
)

// InstallChart installs what `helm template` rendered for the chart without cert-manager, and
// serves it with a local `shadowgate serve` running as the chart's ServiceAccount, with the
// chart's container args and the certificate of the chart's TLS Secret. The release namespace
// must exist. The order is Install's: everything but the webhook configurations, then serve,
// then the webhooks.
//
// There is no kubelet or kube-proxy, so the chart's Deployment never runs and its Service
// routes nowhere. The Service alone is changed: to an ExternalName Service for localhost, and
// each webhook's clientConfig.service.port to the local serve's port. The API server still
// resolves the webhooks' service reference and checks the chart's certificate, for
// <service>.<namespace>.svc, against the chart's caBundle.
func InstallChart(ctx context.Context, k Kubectl, cp *ControlPlane, rendered string, opts ServeOptions) (*Shadowgate, error) {
	objs, err := decodeAll(rendered)
	if err != nil {
		return nil, fmt.Errorf("reading helm template's output: %w", err)
	}
	webhooks, rest, err := splitRendered(objs, &opts)
	if err != nil {
		return nil, err
	}
	for _, o := range rest {
		if o.GetKind() == "Secret" {
			if opts.Certs, err = tlsBundle(o); err != nil {
				return nil, err
			}
		}
	}
	if len(webhooks) == 0 || opts.Certs == nil || opts.Args == nil {
		return nil, fmt.Errorf("the chart renders no webhook configuration, TLS Secret or Deployment running serve (certManager.enabled must be false):\n%s", rendered)
	}
	// As helm install: its hooks (the doctor Jobs, helm test's) are not part of the install.
	rest = slices.DeleteFunc(rest, func(o *unstructured.Unstructured) bool { return o.GetAnnotations()["helm.sh/hook"] != "" })
	if err := applyObjects(ctx, k, rest); err != nil {
		return nil, err
	}
	s, err := Serve(k, cp, opts)
	if err != nil {
		return nil, err
	}
	if err := callServiceAt(webhooks, s.Port); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if err := applyObjects(ctx, k, webhooks); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if err := s.waitCalled(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// splitRendered sets the webhook configurations among rendered objects apart from the rest,
// which are applied before serve starts: the Service made local (localService), and serve's
// flags read from the Deployment into opts.Args.
func splitRendered(objs []*unstructured.Unstructured, opts *ServeOptions) (webhooks, rest []*unstructured.Unstructured, err error) {
	for _, o := range objs {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			webhooks = append(webhooks, o)
			continue
		case "Service":
			o = localService(o)
		case "Deployment":
			if opts.Args, err = serveArgs(o); err != nil {
				return nil, nil, err
			}
		}
		rest = append(rest, o)
	}
	return webhooks, rest, nil
}

// tlsBundle reads a kubernetes.io/tls Secret with the CA beside the certificate.
func tlsBundle(secret *unstructured.Unstructured) (*certs.Bundle, error) {
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	var pem [3][]byte
	for i, key := range []string{certs.CAFile, certs.CertFile, certs.KeyFile} {
		b, err := base64.StdEncoding.DecodeString(data[key])
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("secret %s: no %s (%v)", secret.GetName(), key, err)
		}
		pem[i] = b
	}
	return &certs.Bundle{CA: pem[0], Cert: pem[1], Key: pem[2]}, nil
}

// serveArgs returns the flags of the Deployment's container that runs `shadowgate serve`.
func serveArgs(d *unstructured.Unstructured) ([]string, error) {
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
		if len(args) > 0 && args[0] == "serve" {
			return args[1:], nil
		}
	}
	return nil, fmt.Errorf("deployment %s: no container runs serve", d.GetName())
}

// ReleaseNamespace is the namespace docs/install.md installs the chart into.
const ReleaseNamespace = "shadowgate-system"

// CreateReleaseNamespace creates the namespace the chart is installed into as docs/install.md
// does, with Pod Security level restricted.
func CreateReleaseNamespace(ctx context.Context, k Kubectl) error {
	if _, err := k.Must(ctx, "", "create", "namespace", ReleaseNamespace); err != nil {
		return err
	}
	_, err := k.Must(ctx, "", "label", "namespace", ReleaseNamespace, "pod-security.kubernetes.io/enforce=restricted")
	return err
}

// HelmInstall installs the chart at root/manifests/chart/shadowgate into ReleaseNamespace as
// docs/install.md does, `helm install shadowgate --wait`, so it returns once the webhook's
// replicas, running image (a name the cluster's node pulls), are ready. args are helm's own
// (--set-file policy=...).
func HelmInstall(ctx context.Context, helm string, k Kubectl, root, image string, args ...string) error {
	_, err := runChart(ctx, helm, root, image, append([]string{"install", "--kubeconfig", k.Kubeconfig, "--wait", "--timeout=5m"}, args...))
	return err
}

// HelmTest runs `helm test shadowgate` in ReleaseNamespace, the tests filter selects (such as
// name=shadowgate-install-check; empty for all), and returns what helm printed and, when it
// fails, the logs of the test Jobs: `helm test --logs` reads test Pods alone, and the chart's
// tests are Jobs.
func HelmTest(ctx context.Context, helm string, k Kubectl, filter string) (string, error) {
	args := []string{"test", "shadowgate", "--namespace", ReleaseNamespace, "--kubeconfig", k.Kubeconfig, "--timeout=5m"}
	if filter != "" {
		args = append(args, "--filter", filter)
	}
	out, err := exec.CommandContext(ctx, helm, args...).CombinedOutput()
	if err != nil {
		logs := k.Run(ctx, "", "logs", "-n", ReleaseNamespace, "-l", "app.kubernetes.io/component in (install-check,doctor)", "--all-containers", "--prefix", "--tail=100")
		return string(out) + "\nthe test Jobs' logs:\n" + logs.Output(), fmt.Errorf("helm %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// HelmTemplate renders the chart as HelmInstall installs it, and returns what helm printed.
func HelmTemplate(ctx context.Context, helm, root, image string, args ...string) (string, error) {
	return runChart(ctx, helm, root, image, append([]string{"template"}, args...))
}

// runChart runs helm's command (args[0]) on the chart at root as release shadowgate in
// ReleaseNamespace, with image as the chart's image.
func runChart(ctx context.Context, helm, root, image string, args []string) (string, error) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return "", fmt.Errorf("image %s: want repository:tag", image)
	}
	cmd := exec.CommandContext(ctx, helm, append([]string{args[0], "shadowgate", filepath.Join(root, "manifests/chart/shadowgate"),
		"--namespace", ReleaseNamespace, "--set", "image.repository=" + image[:i], "--set", "image.tag=" + image[i+1:]}, args[1:]...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s%s", strings.Join(cmd.Args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// Refusal is "<field>: <type>" for each error `shadowgate check` (the binary bin) reports for
// the pod in file under the policy ConfigMap manifest policy: the start of each line kubectl
// prints for the webhook's Invalid status. The pod must be refused.
func Refusal(bin, policy, file string) ([]string, error) {
	out, _ := exec.Command(bin, "check", "-o", "json", "--policy", policy, "-f", file).Output() // exit 1: refused
	var report struct {
		Results []struct {
			Allowed bool
			Errors  []struct{ Field, Type string }
		}
	}
	if err := json.Unmarshal(out, &report); err != nil || len(report.Results) != 1 || report.Results[0].Allowed || len(report.Results[0].Errors) == 0 {
		return nil, fmt.Errorf("shadowgate check does not refuse %s (%v):\n%s", file, err, out)
	}
	var lines []string
	for _, e := range report.Results[0].Errors {
		lines = append(lines, e.Field+": "+e.Type)
	}
	return lines, nil
}
