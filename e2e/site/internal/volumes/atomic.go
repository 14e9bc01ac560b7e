package volumes

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one file of a payload: its bytes and its mode.
type File struct {
	Data []byte
	Mode os.FileMode
}

// dataLink is the symlink every user-visible path resolves through; swapping it is the one
// atomic step of an update, as in the kubelet's AtomicWriter.
const dataLink = "..data"

// writeAtomic makes dir hold exactly payload (relative paths to files), through a new
// timestamped directory that the ..data symlink is renamed onto. beforeSwap runs on the new
// directory before it becomes visible (ownership). It reports whether anything changed: an
// unchanged payload is not rewritten, so readers keep their inode.
func writeAtomic(dir string, payload map[string]File, beforeSwap func(tsDir string) error) (bool, error) {
	for p := range payload {
		if err := validPath(p); err != nil {
			return false, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	oldTS, _ := os.Readlink(filepath.Join(dir, dataLink))
	if oldTS != "" && payloadEqual(filepath.Join(dir, oldTS), payload) {
		return false, nil
	}
	tsDir, err := newTimestampDir(dir)
	if err != nil {
		return false, err
	}
	for p, f := range payload {
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(full, f.Data, f.Mode); err != nil {
			return false, err
		}
		// WriteFile's mode is filtered by the umask; the volume's mode is not.
		if err := os.Chmod(full, f.Mode); err != nil {
			return false, err
		}
	}
	if beforeSwap != nil {
		if err := beforeSwap(tsDir); err != nil {
			return false, err
		}
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return false, err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataLink)); err != nil {
		return false, err
	}
	if err := linkTopLevel(dir, payload); err != nil {
		return false, err
	}
	if oldTS != "" {
		if err := os.RemoveAll(filepath.Join(dir, oldTS)); err != nil {
			return true, err
		}
	}
	return true, nil
}

// validPath refuses what the API server's validation refuses too, so a hostile key cannot
// write outside the volume.
func validPath(p string) error {
	if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "..") {
		return fmt.Errorf("volume path %q: must be relative and not start with '..'", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("volume path %q: must not contain '..'", p)
		}
	}
	return nil
}

func newTimestampDir(dir string) (string, error) {
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return "", err
	}
	name := ".." + time.Now().UTC().Format("2006_01_02_15_04_05.000000000") + hex.EncodeToString(suffix[:])
	full := filepath.Join(dir, name)
	return full, os.Mkdir(full, 0o755)
}

// linkTopLevel points each top-level element of the payload at ..data and removes the links
// of elements the payload no longer has.
func linkTopLevel(dir string, payload map[string]File) error {
	want := map[string]bool{}
	for p := range payload {
		want[strings.SplitN(p, "/", 2)[0]] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") || want[e.Name()] {
			continue
		}
		if e.Type()&os.ModeSymlink != 0 {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		link := filepath.Join(dir, n)
		target := filepath.Join(dataLink, n)
		if cur, err := os.Readlink(link); err == nil && cur == target {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	return nil
}

func payloadEqual(tsDir string, payload map[string]File) bool {
	count := 0
	err := filepath.Walk(tsDir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		count++
		rel, _ := filepath.Rel(tsDir, path)
		f, ok := payload[rel]
		// fsGroup ownership only adds group bits, so the owner's and others' bits tell.
		if !ok || info.Mode().Perm()&0o707 != f.Mode.Perm()&0o707 {
			return fmt.Errorf("differs")
		}
		data, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(data, f.Data) {
			return fmt.Errorf("differs")
		}
		return nil
	})
	return err == nil && count == len(payload)
}
