package podrun

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// imageEntrypoints stands in for the entrypoint of the few images the site can run without a
// command: no image is pulled, so a container without a command has nothing to run unless
// its image is listed here. Keys are image references as written in the pod; values are the
// local command the image's entrypoint becomes (the container's args follow it).
var imageEntrypoints = map[string][]string{
	// The pause image only sleeps; some tools create pods of it to hold a node.
	"registry.k8s.io/pause:3.10": {"sleep", "infinity"},
}

// errNoEntrypoint is why a container without a command cannot run on the site.
type errNoEntrypoint struct{ container, image string }

func (e errNoEntrypoint) Error() string {
	return fmt.Sprintf("the site runs no image entrypoints: container %q has no command and image %q is not in the site's entrypoint table", e.container, e.image)
}

// argv is what the container runs: its command (or its image's stand-in entrypoint) and args,
// with $(VAR) expanded from its env as the kubelet does.
func argv(c *corev1.Container, lookup func(string) (string, bool)) ([]string, error) {
	cmd := c.Command
	if len(cmd) == 0 {
		cmd = imageEntrypoints[c.Image]
	}
	if len(cmd) == 0 {
		return nil, errNoEntrypoint{c.Name, c.Image}
	}
	out := make([]string, 0, len(cmd)+len(c.Args))
	for _, a := range append(append([]string{}, cmd...), c.Args...) {
		out = append(out, expand(a, lookup))
	}
	return out, nil
}
