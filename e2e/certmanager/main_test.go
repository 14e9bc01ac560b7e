// Package certmanager tests manifests/overlays/cert-manager against the real cert-manager: its
// upstream controllers and cainjector (built by hack/build-cert-manager.sh from the module
// proxy) on a real kube-apiserver and etcd, with `shadowgate serve` reading its certificate
// from a directory the kubelet's own secret volume code keeps in step with the serving Secret.
// It is a package of its own because the e2e package's TestMain installs the dev overlay,
// whose webhook configurations have the same names.
package certmanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// cluster is what every test uses, set up once by TestMain: the control plane with
// cert-manager running, and serve installed from the cert-manager overlay.
var cluster struct {
	root    string
	dir     string // state and logs
	bin     string // the shadowgate binary
	cp      *harness.ControlPlane
	cm      harness.CertManager
	cmProc  *harness.Process
	sg      *harness.Shadowgate
	kubectl harness.Kubectl
	kube    kubernetes.Interface
	client  client.Client // with cert-manager's types
}

// gracePeriod is serve's --shadow-grace-period; no test here waits for it.
const gracePeriod = time.Minute

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	start := time.Now()
	c := &cluster
	var err error
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "e2e/certmanager:", err)
		return 1
	}
	if c.root, err = filepath.Abs("../.."); err != nil {
		return fail(err)
	}
	tools, err := harness.BuildTools(c.root, os.Stderr)
	if err != nil {
		return fail(err)
	}
	if c.cm, err = harness.BuildCertManager(c.root, os.Stderr); err != nil {
		return fail(err)
	}
	if c.dir, err = os.MkdirTemp("", "shadowgate-cert-manager-"); err != nil {
		return fail(err)
	}
	defer func() {
		if code == 0 {
			os.RemoveAll(c.dir)
		} else {
			fmt.Fprintln(os.Stderr, "e2e/certmanager: state and logs kept in", c.dir)
		}
	}()
	if c.bin, err = harness.BuildShadowgate(c.root, c.dir); err != nil {
		return fail(err)
	}
	if c.cp, err = harness.StartControlPlane(tools, c.dir); err != nil {
		return fail(err)
	}
	defer stop(&code, "the control plane", c.cp.Stop)
	c.kubectl = harness.Kubectl{Path: tools.Kubectl, Kubeconfig: c.cp.AdminKubeconfig}
	if c.kube, err = kubernetes.NewForConfig(c.cp.Admin); err != nil {
		return fail(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cmapi.AddToScheme} {
		if err := add(scheme); err != nil {
			return fail(err)
		}
	}
	if c.client, err = client.New(c.cp.Admin, client.Options{Scheme: scheme}); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if c.cmProc, err = c.cm.Start(ctx, c.kubectl, c.cp, c.dir); err != nil {
		return fail(err)
	}
	// A controller that hangs or crashes on shutdown fails the suite.
	defer stop(&code, "cert-manager", c.cmProc.Stop)
	tlsDir := filepath.Join(c.dir, "tls")
	vol, err := c.cm.StartSecretVolume(c.cp, certs.Namespace, certs.ServingSecretName, tlsDir)
	if err != nil {
		return fail(err)
	}
	defer stop(&code, "the secret volume", vol.Stop)
	c.sg, err = harness.InstallCertManagerOverlay(ctx, c.root, c.kubectl, c.cp,
		harness.ServeOptions{Bin: c.bin, Dir: c.dir, CertDir: tlsDir, GracePeriod: gracePeriod})
	if err != nil {
		return fail(fmt.Errorf("%w\n%s", err, c.cmProc.Tail(30)))
	}
	// serve finishes admissions in flight on SIGTERM and exits cleanly.
	defer stop(&code, "shadowgate serve", c.sg.Stop)
	fmt.Fprintf(os.Stderr, "e2e/certmanager: control plane, cert-manager and shadowgate ready in %s (state and logs in %s)\n",
		time.Since(start).Round(time.Millisecond), c.dir)
	return m.Run()
}

// stop runs a deferred stop, failing the suite when it reports an error.
func stop(code *int, what string, f func() error) {
	if err := f(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/certmanager: stopping %s: %v\n", what, err)
		*code = 1
	}
}
