package volumes

import (
	"os"
	"path/filepath"
)

// The kubelet's SetVolumeOwnership masks (pkg/volume/volume_linux.go): files become
// group-readable (and group-writable unless the volume is read-only), directories also
// group-searchable and setgid, and everything changes group to fsGroup. The owner stays root:
// that is what lets OpenSSH accept a 0400-mode key that the fsGroup reads through its group.
const (
	rwMask   = os.FileMode(0o660)
	roMask   = os.FileMode(0o440)
	execMask = os.FileMode(0o110)
)

func setOwnership(dir string, fsGroup int64, readOnly bool) error {
	return filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(fsGroup)); err != nil {
			return err
		}
		// A symlink's own mode means nothing and chmod would follow it.
		if info.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		mask := rwMask
		if readOnly {
			mask = roMask
		}
		if info.IsDir() {
			mask |= os.ModeSetgid | execMask
		}
		return os.Chmod(path, info.Mode()|mask)
	})
}
