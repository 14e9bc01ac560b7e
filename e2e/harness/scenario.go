package harness

import (
	"fmt"
	"os"
	"strings"
)

// ReliabilityScale is how big the reliability scenarios run: "full" under `make reliability`
// (SHADOWGATE_RELIABILITY=full), "bounded" under `make test` or when unset, so every scenario
// runs in a smaller form within CI's time. Any other value is a mistake (a typo would
// otherwise run a "full" run bounded and report it as such): it panics naming the value,
// which fails the test that asked.
func ReliabilityScale() string {
	scale, err := reliabilityScale()
	if err != nil {
		panic(err.Error())
	}
	return scale
}

func reliabilityScale() (string, error) {
	switch v := os.Getenv(reliabilityEnv); v {
	case "full":
		return "full", nil
	case "", "bounded":
		return "bounded", nil
	default:
		return "", fmt.Errorf("%s=%q: want bounded or full (or unset, for bounded)", reliabilityEnv, v)
	}
}

// reliabilityEnv chooses the ReliabilityScale.
const reliabilityEnv = "SHADOWGATE_RELIABILITY"

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
