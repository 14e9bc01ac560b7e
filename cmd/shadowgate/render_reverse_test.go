package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/interlink-hq/shadowgate/inject"
)

// TestRenderTheTrainerTwice renders the guide's trainer, whose reverse forwards make the
// webhook mutate the pod, then renders the pod it printed: nothing may change, as when the
// API server invokes the webhook again.
func TestRenderTheTrainerTwice(t *testing.T) {
	first := renderList(t, "", "-f", trainer)
	pod := first[0]
	ann := pod.GetAnnotations()
	if !strings.HasPrefix(ann["slurm-job.vk.io/pre-exec"], "# >>> shadowgate: reverse tunnel") {
		t.Errorf("the pre-exec does not start with the snippet:\n%s", ann["slurm-job.vk.io/pre-exec"])
	}
	if !strings.HasPrefix(ann["interlink.eu/reverse-bind"], "127.") {
		t.Errorf("no bind address recorded: %q", ann["interlink.eu/reverse-bind"])
	}
	deployment := first[len(first)-1]
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	var names []string
	for _, c := range containers {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	if strings.Join(names, " ") != inject.ContainerReverse {
		t.Errorf("the trainer's shadow runs %v, want ssh-reverse alone (it exposes no port)", names)
	}

	again, err := json.Marshal(pod.Object)
	if err != nil {
		t.Fatal(err)
	}
	second := renderList(t, string(again), "-f", "-")
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("rendering the rendered trainer changed it (-first +second):\n%s", diff)
	}
}
