package batch

import (
	"fmt"
	"html"
	"path"
)

// notebookPort is where the stand-in notebook listens, the port of the image it replaces.
const notebookPort = "8888"

// standIn is what runs in place of an image's entrypoint when a container names no command:
// no image is pulled on the site, so only the images listed here can run without one.
type standIn struct {
	command, args []string
	// files are written into the container's stand-in directory (relative names).
	files map[string][]byte
}

// standInFor is the site's table of images it knows, image → local entrypoint. dir is the
// container's stand-in directory in the job directory.
func standInFor(image, dir, pod, container string) (standIn, bool) {
	switch image {
	case "docker://jupyter/scipy-notebook", "jupyter/scipy-notebook":
		page := fmt.Sprintf("<!doctype html>\n<title>stand-in notebook</title>\n<p>This is the local interLink site's stand-in notebook for pod %s (container %s, image %s): the site pulls no image, so python3 -m http.server serves this page on port %s instead of Jupyter.</p>\n",
			html.EscapeString(pod), html.EscapeString(container), html.EscapeString(image), notebookPort)
		return standIn{
			command: []string{"python3", "-m", "http.server"},
			args:    []string{"--bind", "0.0.0.0", "--directory", dir, notebookPort},
			files:   map[string][]byte{"index.html": []byte(page)},
		}, true
	}
	return standIn{}, false
}

// standInDir is the stand-in directory of a container, relative to the job directory.
func standInDir(container string) string { return path.Join("stand-in", container) }
