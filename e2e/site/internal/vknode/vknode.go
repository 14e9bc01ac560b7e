// Package vknode registers a Node and runs its pod controller with the virtual-kubelet
// library, for a provider that runs the pods: the part the site's two nodes share. The kubelet
// API (logs) is served over TLS and answers only clients whose certificate the API server's
// kubelet-client CA signed: on the site, the API server alone. Providers record the Events a
// kubelet would (probe failures, back-off) through a recorder of the kubelet's own kind.
package vknode

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
)

// Config is what registers the Node and serves its kubelet API.
type Config struct {
	NodeName   string
	Kubeconfig string
	// Address is the node's InternalIP: where the API server reaches the kubelet API, and
	// the pod IP of every pod on the node (they share its network).
	Address     string
	KubeletPort int
	// TLSCert and TLSKey serve the kubelet API; ClientCA verifies its clients.
	TLSCert, TLSKey, ClientCA string
	Labels                    map[string]string
	Taints                    []corev1.Taint
	// ProviderResolvesEnv leaves env (downward API, Secret and ConfigMap keys, envFrom,
	// Service links) to the provider instead of the library, which resolves it once, before
	// the provider has set status.podIP, and flattens the order the kubelet keeps.
	ProviderResolvesEnv bool
}

// RegisterFlags defines on fs the flags both site nodes take for cfg (the harness's
// contract): -kubeconfig, -node-name, -address, -kubelet-port, -tls-cert, -tls-key, -client-ca.
func (cfg *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of the node's API server client")
	fs.StringVar(&cfg.NodeName, "node-name", "", "name of the Node to register")
	fs.StringVar(&cfg.Address, "address", "127.0.0.1", "node InternalIP, where the kubelet API listens")
	fs.IntVar(&cfg.KubeletPort, "kubelet-port", 10250, "port of the kubelet API (TLS)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "serving certificate of the kubelet API")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "key of the serving certificate")
	fs.StringVar(&cfg.ClientCA, "client-ca", "", "CA that signs the kubelet API's clients (the API server's kubelet client certificate)")
}

// CheckFlags says which flag RegisterFlags defined is missing.
func (cfg *Config) CheckFlags() error {
	for _, f := range []struct{ name, value string }{
		{"kubeconfig", cfg.Kubeconfig}, {"node-name", cfg.NodeName}, {"tls-cert", cfg.TLSCert},
		{"tls-key", cfg.TLSKey}, {"client-ca", cfg.ClientCA},
	} {
		if f.value == "" {
			return fmt.Errorf("-%s is required", f.name)
		}
	}
	return nil
}

// NewProvider builds the provider once the listers exist; client is the node's own, for what
// the listers do not hold (EndpointSlices, ConfigMaps the provider writes); events records
// core/v1 Events as the node's kubelet (NewRecorder).
type NewProvider func(pc nodeutil.ProviderConfig, client kubernetes.Interface, events record.EventRecorder) (nodeutil.Provider, error)

// NewRecorder records core/v1 Events through client as the kubelet does: source component
// "kubelet" and host the node's name, the client-go correlator aggregating repeats and
// rate-limiting each object's Events (its defaults, which the kubelet keeps). stop flushes
// nothing further and ends the broadcaster.
//
// It is not the library's own recorder, which stays as it is ("<node>/pod-controller", its
// ProviderCreateSuccess and such): a kubelet records none of those, so they keep their source.
func NewRecorder(ctx context.Context, client kubernetes.Interface, nodeName string) (events record.EventRecorder, stop func()) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: nodeName}), b.Shutdown
}

// Run registers the node, serves the kubelet API and syncs pods to the provider until ctx is
// done.
func Run(ctx context.Context, cfg Config, newProvider NewProvider) error {
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	events, stopEvents := NewRecorder(ctx, client, cfg.NodeName)
	defer stopEvents()
	mux := http.NewServeMux()
	n, err := nodeutil.NewNode(cfg.NodeName,
		func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
			describe(pc.Node, cfg)
			p, err := newProvider(pc, client, events)
			return p, nil, err
		},
		nodeutil.WithClient(client),
		func(nc *nodeutil.NodeConfig) error {
			nc.HTTPListenAddr = net.JoinHostPort(cfg.Address, strconv.Itoa(cfg.KubeletPort))
			nc.InformerResyncPeriod = 30 * time.Second
			nc.NumWorkers = 4
			nc.Handler = mux
			nc.SkipDownwardAPIResolution = cfg.ProviderResolvesEnv
			return nil
		},
		nodeutil.WithTLSConfig(nodeutil.WithKeyPairFromPath(cfg.TLSCert, cfg.TLSKey), nodeutil.WithCAFromPath(cfg.ClientCA),
			func(c *tls.Config) error { c.MinVersion = tls.VersionTLS12; return nil }),
		nodeutil.AttachProviderRoutes(mux),
	)
	if err != nil {
		return err
	}
	return n.Run(ctx)
}

// describe fills in the Node the library registers: where its kubelet API is, what it holds,
// and the labels and taints that say which pods belong on it.
func describe(n *corev1.Node, cfg Config) {
	// As a kubelet labels every node; the shadow's nodeSelector asks for a linux node.
	n.Labels[corev1.LabelOSStable], n.Labels[corev1.LabelArchStable] = "linux", "amd64"
	for k, v := range cfg.Labels {
		n.Labels[k] = v
	}
	n.Spec.Taints = append(n.Spec.Taints, cfg.Taints...)
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: cfg.Address},
		{Type: corev1.NodeHostName, Address: cfg.NodeName},
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(cfg.KubeletPort)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("500"),
	}
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity
	n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture = "linux", "amd64"
	n.Status.NodeInfo.KubeletVersion = "v1.37.2-site"
}
