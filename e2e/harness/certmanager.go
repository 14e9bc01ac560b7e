package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CertManagerOverlay is the kustomize overlay that has cert-manager issue serve's certificate;
// DevCredentials are the stand-ins for the credentials the example policy names, which the
// dev overlay installs.
const (
	CertManagerOverlay = "manifests/overlays/cert-manager"
	DevCredentials     = "manifests/overlays/dev/credentials.yaml"
)

// CertManager is what hack/build-cert-manager.sh builds.
type CertManager struct {
	Bin          string // cert-manager's own controllers and cainjector (e2e/tools/certmanager)
	CRDs         string // the directory of cert-manager's CRDs, of the same version
	SecretVolume string // the kubelet's secret volume writer (e2e/tools/secretvolume)
}

// BuildCertManager runs hack/build-cert-manager.sh in the repository at root, which builds
// into bin/ what is not there yet (minutes on a fresh machine), and names what it built.
func BuildCertManager(root string, progress *os.File) (CertManager, error) {
	paths, err := runBuildScript(root, "build-cert-manager.sh", progress, "cert-manager", "cert-manager-crds", "secret-volume")
	if err != nil {
		return CertManager{}, err
	}
	return CertManager{Bin: paths["cert-manager"], CRDs: paths["cert-manager-crds"], SecretVolume: paths["secret-volume"]}, nil
}

// Start installs cert-manager's CRDs into the control plane and runs its controllers and
// cainjector against it as the cluster admin, logging to dir/cert-manager.log.
func (cm CertManager) Start(ctx context.Context, k Kubectl, cp *ControlPlane, dir string) (*Process, error) {
	// Server-side apply: the Certificate CRD is too large for client-side apply's annotation.
	if _, err := k.Must(ctx, "", "apply", "--server-side", "-f", cm.CRDs); err != nil {
		return nil, err
	}
	if _, err := k.Must(ctx, "", "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		return nil, err
	}
	return StartProcess("cert-manager", filepath.Join(dir, "cert-manager.log"), cm.Bin, "--kubeconfig", cp.AdminKubeconfig, "-v=2")
}

// StartSecretVolume keeps dir in step with Secret namespace/name as the kubelet keeps a pod's
// optional secret volume: empty while the Secret does not exist, and each version swapped in
// whole through the ..data symlink. Its log is dir.log.
func (cm CertManager) StartSecretVolume(cp *ControlPlane, namespace, name, dir string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	return StartProcess("secret-volume "+name, dir+".log", cm.SecretVolume,
		"--kubeconfig", cp.AdminKubeconfig, "--namespace", namespace, "--name", name, "--dir", dir)
}

// InstallCertManagerOverlay installs the cert-manager overlay, the example policy and its
// stand-in credentials into a control plane where cert-manager runs, as `kubectl apply -k` would, and serves it with a
// local serve: as the overlay's ServiceAccount, with its Deployment's flags, reading
// opts.CertDir, which the caller keeps in step with the serving Certificate's Secret. It
// returns once serve is ready and the API server calls it, which needs the Certificate issued
// and the caBundle injected. The Service and webhook ports are changed as for the chart
// (InstallChart): the API server verifies the certificate for the overlay's Service.
func InstallCertManagerOverlay(ctx context.Context, root string, k Kubectl, cp *ControlPlane, opts ServeOptions) (*Shadowgate, error) {
	rendered, err := k.Must(ctx, "", "kustomize", filepath.Join(root, CertManagerOverlay))
	if err != nil {
		return nil, err
	}
	objs, err := decodeAll(rendered)
	if err != nil {
		return nil, fmt.Errorf("reading kubectl kustomize %s: %w", CertManagerOverlay, err)
	}
	var policy []*unstructured.Unstructured
	for _, f := range []string{ExamplePolicy, DevCredentials} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		o, err := decodeAll(string(b))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		policy = append(policy, o...)
	}
	webhooks, rest, err := splitRendered(objs, &opts)
	if err != nil {
		return nil, err
	}
	if len(webhooks) == 0 || opts.Args == nil || opts.CertDir == "" {
		return nil, fmt.Errorf("%s renders no webhook configuration or Deployment running serve, or no CertDir was given", CertManagerOverlay)
	}
	// The policy and credentials after the overlay's namespace, and serve started before the
	// Certificate is issued, as in a cluster: it waits for the Secret.
	if err := applyObjects(ctx, k, append(rest, policy...)); err != nil {
		return nil, err
	}
	s, err := StartServe(k, cp, opts)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Shadowgate, error) {
		_ = s.Stop()
		return nil, err
	}
	if err := s.WaitReady(time.Minute); err != nil {
		_, why, _ := s.Probe("/readyz/serving-certificate") // /readyz withholds the reason
		return fail(fmt.Errorf("%w\n/readyz/serving-certificate: %s", err, why))
	}
	if err := callServiceAt(webhooks, s.Port); err != nil {
		return fail(err)
	}
	if err := applyObjects(ctx, k, webhooks); err != nil {
		return fail(err)
	}
	if err := s.waitCalled(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}
