package inject

import (
	"fmt"
	"os"
	"testing"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
)

// TestMain runs the tests in a network namespace of their own (sshtest.EnterNodeNetwork), where
// compute nodes get addresses that are not loopback, as the scripts require of a compute node.
func TestMain(m *testing.M) {
	if err := sshtest.EnterNodeNetwork(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
