// Command ociimage pushes images into the local site's registry with go-containerregistry, so
// the node pulls them as a cluster's node pulls from its registry:
//
//	ociimage push-binary BINARY REF   an image of one static binary, /<name>, as its entrypoint
//	ociimage push-archive PATH REF    the image in an OCI layout (a directory, or a tar of one)
//	                                  or in a `docker save` tar
//
// It prints the pushed image as REF@sha256:<digest>. The registry is reached over plain HTTP:
// it listens on loopback only.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const usage = "usage: ociimage push-binary BINARY REF | ociimage push-archive PATH REF"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 3 {
		return errors.New(usage)
	}
	ref, err := name.ParseReference(args[2], name.Insecure)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", args[2], err)
	}
	var pushed v1.Hash
	switch args[0] {
	case "push-binary":
		img, err := binaryImage(args[1])
		if err != nil {
			return err
		}
		if pushed, err = pushImage(ref, img); err != nil {
			return err
		}
	case "push-archive":
		if pushed, err = pushArchive(args[1], ref); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
	fmt.Printf("%s@%s\n", ref.Context().Name(), pushed)
	return nil
}

// binaryImage is an image of one layer holding the binary at /<its file name>, which is the
// entrypoint. The binary must be static: the image has no libc.
func binaryImage(bin string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(bin)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: base, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerData := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerData)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{"/" + base}
	cfg.Config.Env = []string{"PATH=/"}
	return mutate.ConfigFile(img, cfg)
}

// pushArchive pushes the one image (or image index) an OCI layout names, or the one image of a
// `docker save` tar.
func pushArchive(path string, ref name.Reference) (v1.Hash, error) {
	info, err := os.Stat(path)
	if err != nil {
		return v1.Hash{}, err
	}
	dir := path
	if !info.IsDir() {
		isOCI, err := tarHas(path, "index.json")
		if err != nil {
			return v1.Hash{}, err
		}
		if !isOCI {
			img, err := tarball.ImageFromPath(path, nil)
			if err != nil {
				return v1.Hash{}, fmt.Errorf("%s is neither an OCI layout (no index.json) nor a docker save archive: %w", path, err)
			}
			return pushImage(ref, img)
		}
		if dir, err = os.MkdirTemp("", "ociimage-"); err != nil {
			return v1.Hash{}, err
		}
		defer os.RemoveAll(dir)
		if err := untar(path, dir); err != nil {
			return v1.Hash{}, err
		}
	}
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%s: not an OCI layout: %w", path, err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	if len(manifest.Manifests) != 1 {
		return v1.Hash{}, fmt.Errorf("%s names %d images in its index.json; push-archive takes a layout of exactly one image or image index", path, len(manifest.Manifests))
	}
	desc := manifest.Manifests[0]
	if desc.MediaType.IsIndex() {
		child, err := index.ImageIndex(desc.Digest)
		if err != nil {
			return v1.Hash{}, err
		}
		if err := remote.WriteIndex(ref, child, remote.WithAuth(authn.Anonymous)); err != nil {
			return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
		}
		return child.Digest()
	}
	img, err := index.Image(desc.Digest)
	if err != nil {
		return v1.Hash{}, err
	}
	return pushImage(ref, img)
}

func pushImage(ref name.Reference, img v1.Image) (v1.Hash, error) {
	if err := remote.Write(ref, img, remote.WithAuth(authn.Anonymous)); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return img.Digest()
}

// tarHas tells whether the tar file holds a file of that name at its top.
func tarHas(path, file string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s: not a tar archive: %w", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") == file {
			return true, nil
		}
	}
}

// untar extracts the regular files and directories of the tar file into dir, refusing any
// entry that would land outside it.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry %q is a %c, not a file or directory, which an OCI layout does not hold", path, h.Name, h.Typeflag)
		}
	}
}
