// Command genoverlay writes manifests/overlays/cert-manager from certs.CertManagerOverlay; it is
// what `go generate ./certs` runs. Its one argument is the overlay directory.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/interlink-hq/shadowgate/certs"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genoverlay DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "genoverlay:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	files, err := certs.CertManagerOverlay()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}
