package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// newCopyBinaryCommand is the chart's `helm test` Job's first step: shadowgate's image has no
// shell and no cp, and doctor runs in the shadow's image, which has ssh but no shadowgate, so
// the init container copies this very binary into a volume the doctor container mounts.
func newCopyBinaryCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "copy-binary DEST",
		Short:  "Copy this shadowgate binary to DEST (the chart's helm test Job runs doctor from it)",
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := copyExecutable(args[0]); err != nil {
				return &exitError{code: exitUsage, msg: err.Error()}
			}
			return nil
		},
	}
}

// copyExecutable writes the running executable to dest, executable by all, through a
// temporary file renamed into place, so a reader never runs half a binary.
func copyExecutable(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".shadowgate-*")
	if err != nil {
		return fmt.Errorf("copying shadowgate to %s: %w", dest, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("copying shadowgate to %s: %w", dest, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}
