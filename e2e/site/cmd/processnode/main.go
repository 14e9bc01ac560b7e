// Command processnode is the site's ordinary cluster node: it registers a Node and runs the
// pods the scheduler binds to it as processes of this machine (see internal/procnode).
//
//	processnode -kubeconfig FILE -node-name NAME -address IP -kubelet-port PORT \
//	    -tls-cert FILE -tls-key FILE -client-ca FILE -state-dir DIR [-max-backoff DURATION]
//
// It runs as root (mount namespaces, credentials of any user). Stopping it (SIGINT, SIGTERM)
// stops its pods' processes too and removes their state.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/podrun"
	"github.com/interlink-hq/shadowgate/e2e/site/internal/procnode"
	"github.com/interlink-hq/shadowgate/e2e/site/internal/vknode"
	"github.com/interlink-hq/shadowgate/e2e/site/internal/volumes"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// The kubelet's crash-loop back-off starts at 10s.
const initialBackoff = 10 * time.Second

func main() {
	// A container's process starts as this binary re-exec'd: become it before anything else.
	podrun.RunHelperIfRequested()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "processnode:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg vknode.Config
	var stateDir string
	var maxBackoff time.Duration
	cfg.RegisterFlags(flag.CommandLine)
	flag.StringVar(&stateDir, "state-dir", "", "directory for everything the node writes (per-pod volumes, logs, hosts files)")
	flag.DurationVar(&maxBackoff, "max-backoff", 5*time.Minute, "cap of the crash-loop back-off (the kubelet's is 5m)")
	flag.Parse()
	if err := cfg.CheckFlags(); err != nil {
		return err
	}
	if stateDir == "" {
		return fmt.Errorf("-state-dir is required")
	}
	if maxBackoff <= 0 {
		return fmt.Errorf("-max-backoff must be positive")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own binary (re-exec'd for containers): %w", err)
	}
	logger := log.New(os.Stderr, "processnode: ", log.LstdFlags|log.Lmicroseconds)
	// The kubelet's well-known os/arch labels as well: pods (shadows among them) select
	// kubernetes.io/os=linux, and the library does not set them.
	cfg.Labels = map[string]string{
		"node-role.kubernetes.io/worker": "",
		corev1.LabelOSStable:             runtime.GOOS,
		corev1.LabelArchStable:           runtime.GOARCH,
	}
	cfg.ProviderResolvesEnv = true

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	providerDone := make(chan struct{})
	started := false
	err = vknode.Run(ctx, cfg, func(pc nodeutil.ProviderConfig, client kubernetes.Interface, events record.EventRecorder) (nodeutil.Provider, error) {
		// Services and EndpointSlices from an informer of our own: the library's Service lister
		// cannot say when something changed, and it has no EndpointSlices.
		factory := informers.NewSharedInformerFactory(client, 30*time.Second)
		slices := factory.Discovery().V1().EndpointSlices()
		services := factory.Core().V1().Services()
		p, err := procnode.New(procnode.Config{
			StateDir: stateDir, Address: cfg.Address, Exe: exe,
			InitialBackoff: initialBackoff, MaxBackoff: maxBackoff, Resync: 2 * time.Second, Logger: logger,
			ServiceTable: serviceTable(cfg.NodeName), Events: events,
		}, procnode.Sources{ConfigMaps: pc.ConfigMaps, Secrets: pc.Secrets, Services: services.Lister(), EndpointSlices: slices.Lister(), Pods: pc.Pods,
			Tokens: volumes.NewTokenRequester(client.CoreV1()), PodsAPI: client.CoreV1()})
		if err != nil {
			return nil, err
		}
		onChange := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { p.Trigger() },
			UpdateFunc: func(any, any) { p.Trigger() },
			DeleteFunc: func(any) { p.Trigger() },
		}
		if _, err := slices.Informer().AddEventHandler(onChange); err != nil {
			return nil, err
		}
		if _, err := services.Informer().AddEventHandler(onChange); err != nil {
			return nil, err
		}
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		started = true
		go func() { defer close(providerDone); p.Run(ctx) }()
		logger.Printf("node %s: provider ready (address %s, state %s, max back-off %s)", cfg.NodeName, cfg.Address, stateDir, maxBackoff)
		return p, nil
	})
	if started {
		stop()
		<-providerDone
	}
	return err
}

// serviceTable is the node's nftables table for Services: one per node name, so a second site
// node on this machine keeps its own.
func serviceTable(node string) string {
	return "sg_site_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, node)
}
