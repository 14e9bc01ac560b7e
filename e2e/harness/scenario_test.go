package harness

import (
	"fmt"
	"strings"
	"testing"
)

// A scale other than bounded or full fails, naming the value; unset is bounded.
func TestReliabilityScaleRejectsUnknownValues(t *testing.T) {
	for value, want := range map[string]string{"": "bounded", "bounded": "bounded", "full": "full", "ful": "", "FULL": ""} {
		t.Setenv(reliabilityEnv, value)
		got, panicked := func() (scale string, panicked string) {
			defer func() {
				if r := recover(); r != nil {
					panicked = fmt.Sprint(r)
				}
			}()
			return ReliabilityScale(), ""
		}()
		switch {
		case want != "" && (got != want || panicked != ""):
			t.Errorf("%s=%q: got %q (panic %q), want %q", reliabilityEnv, value, got, panicked, want)
		case want == "" && !strings.Contains(panicked, fmt.Sprintf("%q", value)):
			t.Errorf("%s=%q: got %q, want a panic naming the value, got panic %q", reliabilityEnv, value, got, panicked)
		}
	}
}
