// Package e2e tests shadowgate against a real kube-apiserver and etcd, driven by a real
// kubectl: TestMain builds them (hack/e2e-tools.sh, cached in bin/), starts them on loopback,
// installs shadowgate from manifests/overlays/dev and runs `shadowgate serve` as its
// ServiceAccount. Tests share that cluster and each works in namespaces of its own.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
)

// gracePeriod is serve's --shadow-grace-period here: long enough to tell "at once" from
// "after the grace period" on two loaded cores, where a reconcile can lag by seconds; the
// reconciler tests derive their windows from it.
const gracePeriod = 30 * time.Second

// cluster is the control plane and shadowgate every test uses, set up once by TestMain.
var cluster struct {
	root    string
	bin     string // the shadowgate binary being served, also run as `shadowgate check`
	cp      *harness.ControlPlane
	sg      *harness.Shadowgate
	kubectl harness.Kubectl
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	start := time.Now()
	root, err := filepath.Abs("..")
	if err != nil {
		return fail(err)
	}
	tools, err := harness.BuildTools(root, os.Stderr)
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "shadowgate-e2e-")
	if err != nil {
		return fail(err)
	}
	bin, err := harness.BuildShadowgate(root, dir)
	if err != nil {
		return fail(err)
	}
	cp, err := harness.StartControlPlane(tools, dir)
	if err != nil {
		return fail(err)
	}
	kubectl := harness.Kubectl{Path: tools.Kubectl, Kubeconfig: cp.AdminKubeconfig}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sg, err := harness.Install(ctx, root, kubectl, cp, harness.ServeOptions{Bin: bin, Dir: dir, GracePeriod: gracePeriod})
	if err != nil {
		_ = cp.Stop()
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "e2e: control plane and shadowgate ready in %s (state and logs in %s)\n", time.Since(start).Round(time.Millisecond), dir)
	cluster.root, cluster.bin, cluster.cp, cluster.sg, cluster.kubectl = root, bin, cp, sg, kubectl

	code := m.Run()
	// A clean exit on SIGTERM is part of what is tested: serve finishes admissions in flight.
	if err := sg.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: shadowgate serve did not stop cleanly:", err)
		code = 1
	}
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping the control plane:", err)
	}
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "e2e: logs kept in", dir)
	}
	return code
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "e2e:", err)
	return 1
}
