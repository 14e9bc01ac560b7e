package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of the CLI contract.
const (
	exitDenied = 1 // at least one object refused, or the policy is invalid (policy check)
	exitUsage  = 2 // unreadable input, unknown flag, invalid policy given to check or render
)

// exitError ends the process with a code; its message, if any, has not been printed yet.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// pluginBinary is the name kubectl runs the CLI by as a plugin: `kubectl shadowgate` runs the
// kubectl-shadowgate it finds on PATH (make build links it; krew installs it so).
const pluginBinary = "kubectl-shadowgate"

func main() {
	os.Exit(run(filepath.Base(os.Args[0]), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI, invoked as program, and returns the exit code, so tests drive it like
// the binary.
func run(program string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	if strings.TrimSuffix(program, ".exe") == pluginBinary {
		asKubectlPlugin(root)
	}
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var exit *exitError
	if errors.As(err, &exit) {
		if exit.msg != "" {
			fmt.Fprintln(stderr, "error:", exit.msg)
		}
		return exit.code
	}
	// Anything else is cobra refusing the command line: unknown flag, missing argument.
	fmt.Fprintln(stderr, "error:", err)
	return exitUsage
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "shadowgate",
		Short: "Admission webhook and sidecar injector for interLink's SSH shadow",
		Long: `shadowgate judges offloaded pods at admission time: the interlink.eu/reverse-* annotations,
pod-vpn conflicts and the site's SOCKS policy, so a mistake is a kubectl apply denial with a
field path rather than a virtual kubelet log line. The same decisions run offline in
"shadowgate check".`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newCheckCommand(), newRenderCommand(), newPolicyCommand(), newServeCommand(), newStatusCommand(), newDoctorCommand(), newVersionCommand(), newCopyBinaryCommand())
	return root
}

// asKubectlPlugin makes the usage lines and examples of root and its commands say
// `kubectl shadowgate`, the command a plugin's user types.
func asKubectlPlugin(root *cobra.Command) {
	root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl shadowgate"}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Example = strings.ReplaceAll(c.Example, "shadowgate ", "kubectl shadowgate ")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
