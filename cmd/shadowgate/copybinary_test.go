package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The chart's test Job copies shadowgate into a volume before running doctor from it: the copy
// is this binary, byte for byte, executable, and a destination that cannot be written is bad
// input.
func TestCopyBinaryCopiesThisExecutable(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "shadowgate")
	if code, _, stderr := runCLI(t, "", "copy-binary", dest); code != 0 {
		t.Fatalf("copy-binary exited %d: %s", code, stderr)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the copy (%d bytes) is not this binary (%d bytes)", len(got), len(want))
	}
	if fi, err := os.Stat(dest); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the copy's mode is %v (%v), want 0755", fi.Mode(), err)
	}
	if code, _, stderr := runCLI(t, "", "copy-binary", filepath.Join(t.TempDir(), "missing", "shadowgate")); code != exitUsage || stderr == "" {
		t.Errorf("a destination in a missing directory exited %d, want %d with a message: %q", code, exitUsage, stderr)
	}
}
