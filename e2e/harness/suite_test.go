package harness

import (
	"os"
	"testing"
)

// A suite that failed before serve or the control plane started still has its state
// directory dealt with: kept when it failed, removed when all passed.
func TestTearDownKeepsTheStateOfAFailedSuiteOnly(t *testing.T) {
	for code, kept := range map[int]bool{1: true, 0: false} {
		s := &Suite{Dir: t.TempDir()} // no serve, no control plane: a failure before they started
		if got := s.tearDown("test", code); got != code {
			t.Errorf("code %d came back as %d", code, got)
		}
		if _, err := os.Stat(s.Dir); (err == nil) != kept {
			t.Errorf("code %d: state directory kept: %v, want %v", code, err == nil, kept)
		}
	}
}
