package inject

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
)

// TestMain runs the tests in a network namespace of their own (sshtest.EnterNodeNetwork), where
// compute nodes get addresses that are not loopback, as the scripts require of a compute node.
// The shadow image is built first, outside it (buildShadowImageFirst).
func TestMain(m *testing.M) {
	flag.Parse()
	if err := buildShadowImageFirst(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := sshtest.EnterNodeNetwork(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// buildShadowImageFirst builds the shadow image (hack/build-shadow-image.sh) when TestShadowImage
// is to run, before the tests enter their network namespace, which has no route to the package
// archive the build fetches from; built, the script names the archive at once, there too.
func buildShadowImageFirst() error {
	if testing.Short() || sshtest.InNodeNetwork() || os.Geteuid() != 0 {
		return nil
	}
	if run := flag.Lookup("test.run").Value.String(); run != "" {
		if selected, err := regexp.MatchString(run, "TestShadowImage"); err == nil && !selected {
			return nil
		}
	}
	cmd := exec.Command("../hack/build-shadow-image.sh")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the shadow image for TestShadowImage with hack/build-shadow-image.sh (its output is above; -short or -run leaves the test out): %w", err)
	}
	return nil
}
