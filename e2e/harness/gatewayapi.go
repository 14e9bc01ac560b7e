package harness

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// gatewayAPIModule is the module whose standard-channel CRDs InstallGatewayAPI applies: the
// version shadowgate is built against (go.mod), so the site serves the types it writes.
const gatewayAPIModule = "sigs.k8s.io/gateway-api"

// InstallGatewayAPI installs the Gateway API's standard-channel CRDs from the module's own
// config/crd/standard (no ValidatingAdmissionPolicy of its), and waits until the API server
// serves them. Run before shadowgate serve starts: serve looks for HTTPRoutes at its start.
func InstallGatewayAPI(ctx context.Context, root string, k Kubectl) error {
	cmd := exec.CommandContext(ctx, "go", "list", "-mod=readonly", "-m", "-f", "{{.Dir}}", gatewayAPIModule)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return fmt.Errorf("finding %s's sources: %w: %s", gatewayAPIModule, err, stderr)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "config/crd/standard/gateway.networking.k8s.io_*.yaml"))
	var crds []string
	for _, f := range files {
		if !strings.Contains(filepath.Base(f), "_vap_") {
			crds = append(crds, f)
		}
	}
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("%s holds no standard-channel CRDs under config/crd/standard (%v)", gatewayAPIModule, err)
	}
	args := []string{"apply", "--server-side", "--field-manager=e2e-install"}
	names := []string{"wait", "--for=condition=Established", "--timeout=1m"}
	for _, f := range crds {
		args = append(args, "-f", f)
		kind := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "gateway.networking.k8s.io_"), ".yaml")
		names = append(names, "crd/"+kind+".gateway.networking.k8s.io")
	}
	if _, err := k.Must(ctx, "", args...); err != nil {
		return err
	}
	_, err = k.Must(ctx, "", names...)
	return err
}
