package harness

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Kubectl runs the built kubectl against a kubeconfig, as a user would.
type Kubectl struct {
	Path, Kubeconfig string
}

// Result is what one kubectl run printed.
type Result struct {
	Stdout, Stderr string
	Err            error // non-nil when kubectl exited non-zero
}

// Output is stdout and stderr together, in the order a terminal shows them for one-line
// results: warnings and errors (stderr) around the resource lines (stdout).
func (r Result) Output() string { return r.Stderr + r.Stdout }

// Run runs kubectl with args, stdin as its standard input.
func (k Kubectl) Run(ctx context.Context, stdin string, args ...string) Result {
	cmd := exec.CommandContext(ctx, k.Path, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
}

// Must runs kubectl and returns stdout, or an error carrying what kubectl printed.
func (k Kubectl) Must(ctx context.Context, stdin string, args ...string) (string, error) {
	r := k.Run(ctx, stdin, args...)
	if r.Err != nil {
		return r.Stdout, fmt.Errorf("%w\n%s", r.Err, r.Output())
	}
	return r.Stdout, nil
}
