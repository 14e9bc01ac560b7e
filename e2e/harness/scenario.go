package harness

import (
	"fmt"
	"os"
	"strings"
)

// ReliabilityScale is how big the reliability scenarios run: "full" under `make reliability`
// (SHADOWGATE_RELIABILITY=full), "bounded" otherwise, so `make test` runs every scenario in a
// smaller form within CI's time.
func ReliabilityScale() string {
	if os.Getenv("SHADOWGATE_RELIABILITY") == "full" {
		return "full"
	}
	return "bounded"
}

// Scaled picks the figure for the current ReliabilityScale.
func Scaled(bounded, full int) int {
	if ReliabilityScale() == "full" {
		return full
	}
	return bounded
}

// Scenario prints the one line a reliability scenario reports, to stdout, where
// `make reliability` collects it: `RELIABILITY <name> key=value ...`. Figures are given as
// alternating keys and values, so every scenario's line reads the same way.
func Scenario(name string, figures ...any) {
	var b strings.Builder
	fmt.Fprintf(&b, "RELIABILITY %s scale=%s", name, ReliabilityScale())
	for i := 0; i+1 < len(figures); i += 2 {
		fmt.Fprintf(&b, " %v=%v", figures[i], figures[i+1])
	}
	fmt.Println(b.String())
}
