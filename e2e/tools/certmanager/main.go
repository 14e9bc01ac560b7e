// Command cert-manager runs cert-manager's own controllers and cainjector, from the
// github.com/cert-manager/cert-manager module, for the e2e tests. The module proxy does not serve
// cert-manager's cmd/* modules, so this main does what cmd/controller and cmd/cainjector do, for
// the part shadowgate uses: Issuers and ClusterIssuers of the SelfSigned and CA kinds,
// Certificates, the ingress-shim that makes a Certificate of an annotated Ingress (the front
// door), and caBundle injection into webhook configurations from a Certificate.
//
// Each controller is the upstream one, registered with cert-manager's controller registry by
// the package imports below; only the selection and the start-up are ours.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	ingresses "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/ingresses"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// The issuers controller finds the implementation of an Issuer's kind in a registry these
	// packages fill when imported.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// controllers are the names of the upstream controllers this binary runs: the whole Certificate
// life cycle, automatic approval of CertificateRequests (no policy engine runs here, as in a
// default install), signing by SelfSigned and CA issuers, Issuer and ClusterIssuer readiness,
// and the ingress-shim.
var controllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	ingresses.ControllerName,
	approver.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

func main() {
	// A flag set of our own: controller-runtime registers its own --kubeconfig on the global one.
	fs := flag.NewFlagSet("cert-manager", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster to run against")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag
	logf.InitLogs()
	// cainjector logs through controller-runtime's logger; send it where cert-manager's goes.
	ctrl.SetLogger(logf.Log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "cert-manager")
	if err := run(ctx, *kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig string) error {
	g, ctx := errgroup.WithContext(ctx)
	if err := startControllers(ctx, g, kubeconfig); err != nil {
		return err
	}
	g.Go(func() error { return runCAInjector(ctx, kubeconfig) })
	return g.Wait()
}

// startControllers builds the controllers the way cmd/controller does, with upstream's default
// options, then starts the shared informers they registered with.
func startControllers(ctx context.Context, g *errgroup.Group, kubeconfig string) error {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		// Upstream's defaults (cmd/controller's configuration).
		IssuerOptions: controllerpkg.IssuerOptions{ClusterResourceNamespace: "kube-system"},
		IngressShimOptions: controllerpkg.IngressShimOptions{DefaultIssuerKind: "Issuer", DefaultIssuerGroup: "cert-manager.io",
			DefaultAutoCertificateAnnotations: []string{"kubernetes.io/tls-acme"}},
		CertificateOptions: controllerpkg.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return fmt.Errorf("building the controller context: %w", err)
	}
	known := controllerpkg.Known()
	for _, name := range controllers {
		construct, ok := known[name]
		if !ok {
			return fmt.Errorf("controller %q is not registered by the cert-manager module", name)
		}
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("building controller %s: %w", name, err)
		}
		g.Go(func() error {
			if err := c.Run(5, ctx); err != nil {
				return fmt.Errorf("controller %s: %w", name, err)
			}
			return nil
		})
	}
	// Every Context the factory builds shares its informer factories; the controllers have
	// registered their informers by now, so starting them here starts exactly those.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	return nil
}
