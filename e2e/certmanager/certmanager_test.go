// Package certmanager tests manifests/overlays/cert-manager against the real cert-manager: its
// upstream controllers and cainjector (built by hack/build-cert-manager.sh from the module
// proxy) on a real kube-apiserver and etcd. It is a package of its own because the e2e
// package's TestMain installs the dev overlay, whose webhook configurations have the same names.
package certmanager

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// From the overlay to an injected caBundle: CRDs installed, the overlay applied, the issuers and
// Certificates reconciled by cert-manager, and cainjector filling every webhook's caBundle with
// the CA that signed the serving certificate the Deployment mounts.
func TestCertManagerIssuesAndInjects(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tools, err := harness.BuildTools(root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cm := buildCertManager(t, root)
	dir, err := os.MkdirTemp("", "shadowgate-cert-manager-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("state and logs kept in %s", dir)
		} else {
			os.RemoveAll(dir)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	start := time.Now()
	cp, err := harness.StartControlPlane(tools, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	k := harness.Kubectl{Path: tools.Kubectl, Kubeconfig: cp.AdminKubeconfig}
	t.Logf("control plane ready in %s", time.Since(start).Round(time.Millisecond))

	// Server-side apply: the Certificate CRD is too large for client-side apply's annotation.
	start = time.Now()
	mustKubectl(ctx, t, k, "apply", "--server-side", "-f", cm.CRDs)
	mustKubectl(ctx, t, k, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
	t.Logf("cert-manager CRDs established in %s", time.Since(start).Round(time.Millisecond))

	log := filepath.Join(dir, "cert-manager.log")
	ctx = startCertManager(ctx, t, cm.Bin, cp.AdminKubeconfig, log)
	start = time.Now()
	mustKubectl(ctx, t, k, "apply", "--server-side", "-k", filepath.Join(root, "manifests", "overlays", "cert-manager"))
	if r := k.Run(ctx, "", "wait", "--for=condition=Ready", "--timeout=120s", "-n", certs.Namespace,
		"certificate/"+certs.ServingCertificateName); r.Err != nil {
		described := k.Run(ctx, "", "describe", "-n", certs.Namespace, "issuers,certificates,certificaterequests")
		t.Fatalf("the serving Certificate did not become Ready: %v%s\n%s\n%s\n%s", r.Err, exited(ctx), r.Output(), described.Output(), tail(log, 40))
	}
	t.Logf("serving Certificate Ready %s after applying the overlay", time.Since(start).Round(time.Millisecond))

	client, err := kubernetes.NewForConfig(cp.Admin)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := client.CoreV1().Secrets(certs.Namespace).Get(ctx, certs.ServingSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	caSecret, err := client.CoreV1().Secrets(certs.Namespace).Get(ctx, certs.CASecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The serving certificate verifies, for the name the API server dials, against the ca.crt
	// the webhook Secret carries, and that is the CA Certificate's own certificate.
	caPEM := serving.Data["ca.crt"]
	if !bytes.Equal(caPEM, caSecret.Data["tls.crt"]) {
		t.Errorf("%s ca.crt is not the certificate of %s", certs.ServingSecretName, certs.CASecretName)
	}
	verifyServing(t, caPEM, serving.Data["tls.crt"])

	var last map[string][]byte
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := webhookBundles(ctx, client)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = got
		for _, b := range last {
			if !bytes.Equal(b, caPEM) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		if last == nil {
			err = fmt.Errorf("%w; reading the webhook configurations: %v", err, lastErr)
		}
		t.Fatalf("cainjector did not set every caBundle to the serving CA: %v%s\n%s\n%s", err, exited(ctx), describeBundles(last, caPEM), tail(log, 40))
	}
	if len(last) != 4 {
		t.Errorf("want the 4 webhooks of manifests/base, got %d:\n%s", len(last), describeBundles(last, caPEM))
	}
	t.Logf("caBundle injected into %d webhooks %s after applying the overlay", len(last), time.Since(start).Round(time.Millisecond))
}

// exited says why ctx ended when cert-manager's exit ended it.
func exited(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return " (" + cause.Error() + ")"
	}
	return ""
}

func mustKubectl(ctx context.Context, t *testing.T, k harness.Kubectl, args ...string) {
	t.Helper()
	if _, err := k.Must(ctx, "", args...); err != nil {
		t.Fatal(err)
	}
}
