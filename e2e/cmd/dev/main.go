// Command dev is `make dev`. As root it runs the whole local site (harness.StartLocalSite):
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler, the real cluster node
// (kubelet, containerd, CNI, kube-proxy, CoreDNS) that runs the shadows from the shadow image,
// virtual nodes that turn pods into jobs of a real Slurm, login nodes' sshd, and the site's
// credentials; then it installs the chart with helm, with the site's policy, shadowgate running
// as the chart's pods from the image the Dockerfile builds, as docs/install.md installs it.
// Without root it runs the admission-only control plane (etcd, kube-apiserver, a local
// `shadowgate serve` installed from manifests/overlays/dev with the example policy) and says
// so. It runs until interrupted; Ctrl-C stops everything it started and removes its state.
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
	if os.Geteuid() == 0 {
		return runSite(ctx, root, dir, tools, grace)
	}
	fmt.Fprintln(os.Stderr, "dev: not root, so no local site (it creates accounts, a network namespace and runs sshd and Slurm):",
		"starting etcd and kube-apiserver alone in", dir, "- pods are admitted and stored, never run")
	return runAdmission(ctx, root, dir, tools, bin, port, grace)
}

// runSite runs the local site and installs the chart into it with helm, as docs/install.md
// does, shadowgate running as the chart's pods from the image the Dockerfile builds.
func runSite(ctx context.Context, root, dir string, tools harness.Tools, grace time.Duration) error {
	siteTools, err := harness.BuildSiteTools(root, os.Stderr)
	if err != nil {
		return err
	}
	helm, err := harness.BuildHelm(root, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "dev: starting the local site (control plane with controllers, Slurm, login nodes, nodes) in", dir)
	if err := os.Chmod(dir, 0o755); err != nil { // the site's accounts read their keys and jobs under it
		return err
	}
	cp, err := harness.StartCluster(tools, dir)
	if err != nil {
		return err
	}
	defer stopLogged("control plane", cp.Stop)
	kubectl := harness.Kubectl{Path: tools.Kubectl, Kubeconfig: cp.AdminKubeconfig}
	if err := harness.CreateReleaseNamespace(ctx, kubectl); err != nil {
		return err
	}
	if _, err := kubectl.Must(ctx, "", "create", "namespace", "user"); err != nil {
		return err
	}
	ls, err := harness.StartLocalSite(ctx, root, dir, kubectl, cp, siteTools)
	if err != nil {
		return err
	}
	defer stopLogged("the site", ls.Stop)
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(ls.Policy), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "dev: helm install shadowgate manifests/chart/shadowgate, image", siteTools.Webhook.Name)
	if err := harness.HelmInstall(ctx, helm, kubectl, root, siteTools.Webhook.Name,
		"--set-file", "policy="+policyFile, "--set", "shadowGracePeriod="+grace.String()); err != nil {
		return err
	}
	k := tools.Kubectl
	fmt.Printf(`ready: KUBECONFIG=%[1]s

  export KUBECONFIG=%[1]s
  %[2]s get nodes -o wide                                   # the real cluster node and the virtual nodes
  %[2]s get pods -n shadowgate-system -o wide               # shadowgate, installed by helm from its image
  %[2]s apply -f manifests/examples/notebook.yaml           # the guide's notebook, offloaded to %[3]s
  SLURM_CONF=%[4]s squeue           # its batch job, named after the pod's UID
  %[2]s get pod -n user-shadow -o wide                      # the shadow: Ready, with an IP of its own
  %[2]s describe pod -n user-shadow | grep 'Image ID'       # pulled from the site's registry, by digest
  curl http://$(%[2]s get svc -n user-shadow notebook-user -o jsonpath='{.spec.clusterIP}'):8888/
                                                            # the notebook's page, through the shadow Service
  %[2]s exec -n user-shadow deploy/notebook-user -c ssh-forward -- ssh -V   # inside the shadow
  %[2]s logs -n user notebook                               # the job's output
  %[2]s describe pod -n user notebook                       # TunnelReady: how to reach it
  %[2]s get tunnels -n user                                 # every tunnel's state in the namespace
  PATH=$PWD/bin:$PATH %[2]s shadowgate status -n user -w    # the same, as a kubectl plugin, watched
  sed 's/%[3]s/%[5]s/' manifests/examples/notebook.yaml | %[2]s apply -f -   # after deleting the first:
                                                            # %[5]s's login node refuses forwarding; exec mode relays
  %[6]s test shadowgate -n shadowgate-system --kubeconfig %[1]s   # doctor, per SSH node, from the cluster

shadowgate log: %[2]s logs -n shadowgate-system deploy/shadowgate   site logs: %[7]s   node logs: %[8]s
Ctrl-C stops the site, shadowgate and the control plane.
`, cp.AdminKubeconfig, k, harness.HPCNode, ls.HPC.SlurmConf, harness.NoForwardNode, helm, ls.HPC.Dir, ls.Node.Dir)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "\ndev: stopping")
	return nil
}

// runAdmission runs etcd, kube-apiserver and shadowgate serve (bin) with the example policy:
// what admission does, with no node to run a pod.
func runAdmission(ctx context.Context, root, dir string, tools harness.Tools, bin string, port int, grace time.Duration) error {
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
	return wait(ctx, sg)
}

// wait returns when ctx is done (Ctrl-C) or serve exits.
func wait(ctx context.Context, sg *harness.Shadowgate) error {
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
