// Command ociimage pushes images into the local site's registry with go-containerregistry, so
// the node pulls them as a cluster's node pulls from its registry:
//
//	ociimage push-binary BINARY REF   an image of one static binary, /<name>, as its entrypoint
//	ociimage push-archive PATH REF    the image in an OCI layout (a directory, or a tar of one)
//	                                  or in a `docker save` tar
//	ociimage push-index REF PATH...   the images of these archives (as push-archive, one image
//	                                  each), and an image index of them by their platforms
//
// It prints the pushed image as REF@sha256:<digest>, and push-index then a line per image,
// <os>/<arch> REF@sha256:<digest>. A registry on loopback is reached over plain HTTP, any
// other over HTTPS with the credentials of docker's configuration (docker login).
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

const usage = "usage: ociimage push-binary BINARY REF | ociimage push-archive PATH REF | ociimage push-index REF PATH..."

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) >= 3 && args[0] == "push-index" {
		ref, err := name.ParseReference(args[1], name.Insecure)
		if err != nil {
			return fmt.Errorf("image reference %q: %w", args[1], err)
		}
		pushed, platforms, err := pushIndex(ref, args[2:])
		if err != nil {
			return err
		}
		fmt.Printf("%s@%s\n", ref.Context().Name(), pushed)
		for _, p := range platforms {
			fmt.Printf("%s %s@%s\n", p.platform, ref.Context().Name(), p.digest)
		}
		return nil
	}
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
	img, index, cleanup, err := readArchive(path)
	if err != nil {
		return v1.Hash{}, err
	}
	defer cleanup()
	if index != nil {
		if err := remote.WriteIndex(ref, index, auth()); err != nil {
			return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
		}
		return index.Digest()
	}
	return pushImage(ref, img)
}

// platformImage is an image of an index pushed, by its platform.
type platformImage struct {
	platform string
	digest   v1.Hash
}

// pushIndex pushes the one image of each archive by digest, then an image index of them under
// ref, each image's platform its config's.
func pushIndex(ref name.Reference, archives []string) (v1.Hash, []platformImage, error) {
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var pushed []platformImage
	for _, path := range archives {
		img, sub, cleanup, err := readArchive(path)
		if err != nil {
			return v1.Hash{}, nil, err
		}
		defer cleanup()
		if sub != nil {
			return v1.Hash{}, nil, fmt.Errorf("%s holds an image index; push-index takes archives of one image each", path)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return v1.Hash{}, nil, fmt.Errorf("%s: %w", path, err)
		}
		if cfg.OS == "" || cfg.Architecture == "" {
			return v1.Hash{}, nil, fmt.Errorf("%s: the image's config names no os and architecture, which an index entry needs", path)
		}
		digest, err := img.Digest()
		if err != nil {
			return v1.Hash{}, nil, err
		}
		if err := remote.Write(ref.Context().Digest(digest.String()), img, auth()); err != nil {
			return v1.Hash{}, nil, fmt.Errorf("pushing %s of %s: %w", digest, path, err)
		}
		platform := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
		pushed = append(pushed, platformImage{platform: platform.String(), digest: digest})
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	if err := remote.WriteIndex(ref, index, auth()); err != nil {
		return v1.Hash{}, nil, fmt.Errorf("pushing %s: %w", ref, err)
	}
	digest, err := index.Digest()
	return digest, pushed, err
}

// readArchive reads the one image, or image index, an OCI layout (a directory, or a tar of one)
// names, or the one image of a `docker save` tar. cleanup removes what reading it left, once
// the image is no longer read.
func readArchive(path string) (img v1.Image, index v1.ImageIndex, cleanup func(), err error) {
	cleanup = func() {}
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, cleanup, err
	}
	dir := path
	if !info.IsDir() {
		isOCI, err := tarHas(path, "index.json")
		if err != nil {
			return nil, nil, cleanup, err
		}
		if !isOCI {
			img, err := tarball.ImageFromPath(path, nil)
			if err != nil {
				return nil, nil, cleanup, fmt.Errorf("%s is neither an OCI layout (no index.json) nor a docker save archive: %w", path, err)
			}
			return img, nil, cleanup, nil
		}
		if dir, err = os.MkdirTemp("", "ociimage-"); err != nil {
			return nil, nil, cleanup, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		if err := untar(path, dir); err != nil {
			return nil, nil, cleanup, err
		}
	}
	layoutIndex, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, nil, cleanup, fmt.Errorf("%s: not an OCI layout: %w", path, err)
	}
	manifest, err := layoutIndex.IndexManifest()
	if err != nil {
		return nil, nil, cleanup, err
	}
	if len(manifest.Manifests) != 1 {
		return nil, nil, cleanup, fmt.Errorf("%s names %d images in its index.json; push-archive takes a layout of exactly one image or image index", path, len(manifest.Manifests))
	}
	desc := manifest.Manifests[0]
	if desc.MediaType.IsIndex() {
		index, err = layoutIndex.ImageIndex(desc.Digest)
		return nil, index, cleanup, err
	}
	img, err = layoutIndex.Image(desc.Digest)
	return img, nil, cleanup, err
}

// auth gives the credentials of docker's configuration for the registry, if it names any.
func auth() remote.Option { return remote.WithAuthFromKeychain(authn.DefaultKeychain) }

func pushImage(ref name.Reference, img v1.Image) (v1.Hash, error) {
	if err := remote.Write(ref, img, auth()); err != nil {
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
