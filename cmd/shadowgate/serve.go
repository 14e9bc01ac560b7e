package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/internal/controllers/frontdoordomains"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/serving"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// exitServeFailed is serve's exit code when it cannot start or stops on an error.
const exitServeFailed = 1

// Where a pod finds its own namespace, and the namespace assumed outside a cluster.
const (
	serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	defaultNamespace            = "shadowgate-system"
)

type serveOptions struct {
	kubeconfig       string
	certDir          string
	certificate      string
	host             string
	port             int
	metricsAddr      string
	probeAddr        string
	namespace        string
	policyConfigMap  string
	frontDoorDomains string
	grace            time.Duration
	maxUnconfirmed   int
	maxPerNamespace  int
	maxRolling       int
	leaderElect      bool
	logFormat        string
	logLevel         string
	shutdownTimeout  time.Duration
	shutdownDelay    time.Duration
	credentials      credentialFlags
	// clientCAFile, when set, is the CA whose client certificates alone may call the webhook.
	clientCAFile string
}

func newServeCommand() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the admission webhook and the shadow reconciler",
		Long: `Serve the admission endpoints /mutate-pods, /validate-pods, /validate-workloads and
/validate-configmaps over TLS, apply each admitted pod's shadow with server-side apply, and
reconcile shadows with their pods. Ready (/readyz) once the policy is loaded, tls.crt and
tls.key are read from --cert-dir (/readyz/serving-certificate says what is awaited) and the
webhook server is serving; SIGTERM or Ctrl-C drains the connections (--shutdown-delay),
finishes the admissions in flight, then exits.`,
		Example: `  shadowgate serve --kubeconfig ~/.kube/config --cert-dir ./certs --log-format console`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, the in-cluster service account, then ~/.kube/config")
	f.StringVar(&o.certDir, "cert-dir", "/etc/shadowgate/tls", "directory holding tls.crt and tls.key; files replaced there are served without a restart, and serve is not ready while they are missing")
	f.StringVar(&o.certificate, certs.CertificateFlag, "", "name of the cert-manager Certificate, in --namespace, that writes the Secret mounted as --cert-dir; while the files are missing, serve reports its Ready condition")
	f.StringVar(&o.host, "bind-address", "", "address the webhook server listens on; empty for all")
	f.IntVar(&o.port, "port", 9443, "port of the webhook server")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (/metrics); 0 disables it")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.StringVar(&o.namespace, "namespace", "", "namespace of the policy ConfigMap, the credentials to copy and the leader lease; default the namespace shadowgate runs in, "+defaultNamespace+" outside a cluster")
	f.StringVar(&o.policyConfigMap, "policy-configmap", policy.ConfigMapName, "name of the policy ConfigMap")
	f.StringVar(&o.frontDoorDomains, "front-door-domains-configmap", frontdoordomains.DefaultName, "name of the ConfigMap, in --namespace, that serve keeps listing the front door's domains: the parameter of the ValidatingAdmissionPolicy that reserves their hosts for shadowgate")
	f.DurationVar(&o.grace, "shadow-grace-period", 2*time.Minute, "how long a shadow whose pod was never stored waits before it is deleted")
	f.IntVar(&o.maxRolling, "max-rolling-shadows", 5, "how many shadows carrying traffic are rolled at a time to a policy that renders them differently, each from its apply until its shadow pod is replaced (10 minutes at most); once one roll has, shadows whose tunnel is not Ready roll without a turn, and after that many rolls in a row time out none starts until the next policy")
	f.IntVar(&o.maxUnconfirmed, "max-unconfirmed-shadows", 200, "how many shadows a replica may have applied at admission for pods the API server has not stored yet; past it such admissions are refused with 429 until the pods are stored or the grace period has passed")
	f.IntVar(&o.maxPerNamespace, "max-unconfirmed-shadows-per-namespace", 50, "how many of --max-unconfirmed-shadows the pods of one namespace may hold; past it that namespace's such admissions are refused with 429, naming it, while other namespaces are admitted")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect one replica to run the reconciler, so replicas do not fight over shadows")
	f.StringVar(&o.logFormat, "log-format", "json", "log format: json or console")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for admissions in flight and the reconciler")
	f.DurationVar(&o.shutdownDelay, "shutdown-delay", 3*time.Second, "how long SIGTERM keeps serving, not ready and closing each connection after its answer, before shutdown begins: connections that carry a call meanwhile are closed cleanly, which narrows the race of the API server writing a call into a connection being closed; a second signal ends serve at once")
	f.StringVar(&o.clientCAFile, "client-ca-file", "", "PEM CA bundle: the webhook server then requires a client certificate it signed, so only the API server, given such a certificate in its AdmissionConfiguration, can call the endpoints; empty accepts any client")
	o.credentials.addFlags(cmd)
	return cmd
}

func (o *serveOptions) run(cmd *cobra.Command) error {
	logger, err := o.logger(cmd)
	if err != nil {
		return err
	}
	// controller-runtime and client-go log through process-wide loggers of their own.
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	cfg, err := o.restConfig()
	if err != nil {
		return &exitError{code: exitServeFailed, msg: "reading the kubeconfig: " + err.Error()}
	}
	namespace := o.namespace
	if namespace == "" {
		namespace = ownNamespace()
	}
	servingCert, err := o.servingCertificate(cfg, namespace, logger.WithName("certs"))
	if err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	if o.credentials.replication && o.credentials.inPodNamespaces {
		logger.Info("WARNING: pods with interlink.eu/shadow-same-ns have the site's key or keytab copied into their own namespace, " +
			"where their authors can read it, because serve runs with --" + validate.CredentialsInPodNamespacesFlag + "=true " +
			"(chart value credentialsInPodNamespaces: true, kustomize component credentials-in-pod-namespaces); drop it unless every such pod's author may hold the site's credentials")
	}
	clientCA, err := o.clientCA(logger.WithName("client-ca"))
	if err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	webhookServer := o.webhookServer(servingCert, clientCA)
	discover, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	gatewayAPI, err := shadows.GatewayAPIServed(discover)
	if err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	if !gatewayAPI {
		logger.Info("the API server serves no Gateway API HTTPRoutes: a front door of kind HTTPRoute cannot be applied, and its shadows are refused; serve restarts itself within a minute of the Gateway API being installed")
	}
	mgrOpts := o.managerOptions(namespace, webhookServer, logger, gatewayAPI)
	webhooks := serving.NewDrainingServer(mgrOpts.WebhookServer)
	mgrOpts.WebhookServer = webhooks
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	if err := mgr.AddReadyzCheck("not-draining", webhooks.NotDraining); err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	if err := mgr.Add(servingCert); err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	if err := mgr.AddReadyzCheck("serving-certificate", servingCert.Check); err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	if clientCA != nil {
		if err := mgr.Add(clientCA); err != nil {
			return &exitError{code: exitServeFailed, msg: err.Error()}
		}
	}
	metrics, err := metrics.New(ctrlmetrics.Registry)
	if err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	if err := registerProcessMetrics(servingCert); err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	decisions, err := serving.NewDecisions(ctrlmetrics.Registry)
	if err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	signalled, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	restarting, restart := context.WithCancelCause(signalled)
	defer restart(nil)
	ctx := serving.DrainThenStop(restarting, stop, webhooks, o.shutdownDelay, logger)
	if err := mgr.Add(&gatewayAPIWatch{discover: discover, served: gatewayAPI, period: gatewayAPIPoll, restart: restart, log: logger.WithName("gateway-api")}); err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	opts := setupOptions{
		Policy:                validate.PolicyRef{Namespace: namespace, Name: o.policyConfigMap},
		FrontDoorDomains:      types.NamespacedName{Namespace: namespace, Name: o.frontDoorDomains},
		ShadowGracePeriod:     o.grace,
		Rules:                 o.credentials.rules(),
		MaxUnconfirmedShadows: o.maxUnconfirmed,
		UnconfirmedShare:      o.maxPerNamespace,
		MaxRollingShadows:     o.maxRolling,
		GatewayAPI:            gatewayAPI,
	}
	waitForCleanups, err := setup(ctx, mgr, opts, metrics, decisions)
	if err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	err = mgr.Start(ctx)
	// Refused pods' shadow objects are removed after the denial is sent; they are not left
	// behind for the grace period of another replica's reconciler.
	waitForCleanups()
	if err != nil {
		return &exitError{code: exitServeFailed, msg: err.Error()}
	}
	if cause := context.Cause(restarting); errors.Is(cause, errGatewayAPIChanged) {
		return &exitError{code: exitServeFailed, msg: cause.Error()}
	}
	return nil
}

func (o *serveOptions) logger(cmd *cobra.Command) (logr.Logger, error) {
	level, err := zapcore.ParseLevel(o.logLevel)
	if err != nil {
		return logr.Logger{}, usageError("--log-level must be debug, info, warn or error, not %q", o.logLevel)
	}
	encoder := crzap.JSONEncoder()
	switch o.logFormat {
	case "json":
	case "console":
		encoder = crzap.ConsoleEncoder()
	default:
		return logr.Logger{}, usageError("--log-format must be json or console, not %q", o.logFormat)
	}
	return crzap.New(crzap.WriteTo(cmd.ErrOrStderr()), encoder, crzap.Level(level), crzap.StacktraceLevel(zapcore.PanicLevel)), nil
}

func (o *serveOptions) restConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = config.GetConfig()
	}
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "shadowgate/" + version
	// No client-side rate limit: one admission makes several calls (applies, credentials), and
	// a limit here would queue pods behind each other under load, toward the API server's
	// timeout for the webhook call. The API server's priority and fairness protects it.
	cfg.QPS = -1
	return cfg, nil
}

// managerOptions are the manager's; gatewayAPI says whether the API server serves HTTPRoutes
// (shadows.GatewayAPIServed), which the cache then holds too.
func (o *serveOptions) managerOptions(namespace string, webhookServer ctrlwebhook.Server, logger logr.Logger, gatewayAPI bool) manager.Options {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme) // registering built-in types into a new scheme cannot fail
	_ = v1alpha1.AddToScheme(scheme)
	_ = gatewayv1.Install(scheme)
	// Only shadow objects: the reconciler needs no other Deployment, Service, ConfigMap,
	// NetworkPolicy, Ingress or HTTPRoute, and the scripts ConfigMaps are no shadow's.
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range shadows.Objects(gatewayAPI) {
		byObject[obj] = cache.ByObject{Label: shadows.Selector}
	}
	return manager.Options{
		Scheme: scheme,
		Logger: logger,
		Cache: cache.Options{
			ByObject: byObject,
			// The cache holds every pod in the cluster (the reconciler watches them all), in a
			// container of 256Mi; managedFields are often a pod's largest part, and nothing reads
			// them from the cache (shadows are written with server-side apply, which needs no
			// copy of them). Everything else stays: the reconciler rebuilds shadows from pods.
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "shadowgate.interlink.eu",
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.shutdownTimeout,
		WebhookServer:                 webhookServer,
	}
}

// clientCA reads --client-ca-file, or is nil without it.
func (o *serveOptions) clientCA(log logr.Logger) (*certs.ClientCA, error) {
	if o.clientCAFile == "" {
		return nil, nil
	}
	ca, err := certs.NewClientCA(o.clientCAFile, log)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w: give the CA that signed the API server's webhook client certificate", err)
	}
	return ca, nil
}

// webhookServer serves the admission endpoints over TLS with the certificate serving reads,
// and with a clientCA only to clients presenting a certificate its bundle in force signed.
func (o *serveOptions) webhookServer(serving *certs.Serving, clientCA *certs.ClientCA) ctrlwebhook.Server {
	return ctrlwebhook.NewServer(ctrlwebhook.Options{
		Host: o.host,
		Port: o.port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			// serving waits for the files rather than failing the server without them.
			c.GetCertificate = serving.GetCertificate
			c.MinVersion = tls.VersionTLS12
			// HTTP/1.1 only: the API server needs nothing more, and HTTP/2 brings the
			// stream-reset floods (CVE-2023-44487) into a component on every pod's path.
			c.NextProtos = []string{"http/1.1"}
			if clientCA != nil {
				// Anyone who reaches the port could otherwise send a hand-written review and
				// have shadowgate apply a shadow and copy the site's credentials.
				c.ClientAuth = tls.RequireAndVerifyClientCert
				// A resumed session is not checked against the bundle again: after a CA is
				// rotated out, its clients must not get back in on an old ticket.
				c.SessionTicketsDisabled = true
				c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
					each := c.Clone()
					each.ClientCAs = clientCA.Pool()
					return each, nil
				}
			}
		}},
	})
}

// ownNamespace is the namespace of the service account shadowgate runs as, or
// shadowgate-system outside a cluster.
func ownNamespace() string {
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return defaultNamespace
}
