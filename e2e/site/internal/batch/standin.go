package batch

import (
	"fmt"
	"html"

	corev1 "k8s.io/api/core/v1"
)

// StandInDir is where, in the job directory, the launcher's stand-in images find their files:
// no image is pulled on the site, so a container without a command runs the launcher's
// stand-in for its image's entrypoint (launcher/singularity), which serves this directory.
const StandInDir = "stand-in"

// runsAnImage reports whether a container of the pod has no command, so that `singularity run`
// starts its image's own entrypoint.
func runsAnImage(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if len(c.Command) == 0 {
				return true
			}
		}
	}
	return false
}

// standInPage is the page the stand-in notebook serves, naming the pod.
func standInPage(pod *corev1.Pod) File {
	page := fmt.Sprintf("<!doctype html>\n<title>stand-in notebook</title>\n<p>This is the local interLink site's stand-in notebook for pod %s: the site pulls no image, so its launcher serves this page with python3 -m http.server in place of the image's own entrypoint.</p>\n",
		html.EscapeString(pod.Namespace+"/"+pod.Name))
	return File{Path: StandInDir + "/index.html", Mode: 0o600, Data: []byte(page)}
}
