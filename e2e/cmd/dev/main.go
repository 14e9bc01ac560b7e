// Command dev is `make dev`: a local control plane (etcd, kube-apiserver) with `shadowgate
// serve` installed from manifests/overlays/dev, the example policy and stand-in credentials,
// running until interrupted. Ctrl-C stops everything it started and removes its state.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

func main() {
	root := flag.String("root", ".", "the shadowgate repository")
	bin := flag.String("shadowgate", "bin/shadowgate", "the shadowgate binary to serve")
	port := flag.Int("port", 9443, "webhook port; the dev overlay's urls name 9443")
	grace := flag.Duration("shadow-grace-period", 2*time.Minute, "passed to shadowgate serve")
	flag.Parse()
	if err := run(*root, *bin, *port, *grace); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func run(root, bin string, port int, grace time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	tools, err := harness.BuildTools(root, os.Stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "shadowgate-dev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintln(os.Stderr, "dev: starting etcd and kube-apiserver in", dir)
	cp, err := harness.StartControlPlane(tools, dir)
	if err != nil {
		return err
	}
	defer stopLogged("control plane", cp.Stop)
	kubectl := harness.Kubectl{Path: tools.Kubectl, Kubeconfig: cp.AdminKubeconfig}
	binPath, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	sg, err := harness.Install(ctx, root, kubectl, cp, harness.ServeOptions{Bin: binPath, Dir: dir, Port: port, GracePeriod: grace})
	if err != nil {
		return err
	}
	defer stopLogged("shadowgate serve", sg.Stop)
	if _, err := kubectl.Must(ctx, "", "create", "namespace", "user"); err != nil {
		return err
	}
	k := tools.Kubectl
	fmt.Printf(`ready: KUBECONFIG=%s

  export KUBECONFIG=%s
  %s apply -f cmd/shadowgate/testdata/refused-trainer.yaml  # refused with field paths
  %s apply -f manifests/examples/trainer.yaml               # admitted; its shadow is applied
  %s get deploy,svc,cm,secret -n user-shadow --show-labels  # the shadow, applied by shadowgate
  %s edit configmap -n shadowgate-system shadowgate-policy  # policy changes apply without restart

shadowgate log: %s   metrics: http://127.0.0.1:%d/metrics   readyz: http://127.0.0.1:%d/readyz
Ctrl-C stops shadowgate, kube-apiserver and etcd.
`, cp.AdminKubeconfig, cp.AdminKubeconfig, k, k, k, k, sg.Log, sg.MetricsPort, sg.ProbePort)
	select {
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "\ndev: stopping")
		return nil
	case <-sg.Done():
		return sg.Exited()
	}
}

func stopLogged(what string, stop func() error) {
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "dev: stopping %s: %v\n", what, err)
	}
}
