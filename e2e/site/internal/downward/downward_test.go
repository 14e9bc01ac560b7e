package downward

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFieldResolvesAsTheKubeletDoes(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "u-1",
			Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"note": `say "hi"`}},
		Spec: corev1.PodSpec{NodeName: "cluster-node", ServiceAccountName: "sa"},
	}
	for name, c := range map[string]struct{ path, podIP, want string }{
		"the pod's name":                    {"metadata.name", "", "web"},
		"its namespace":                     {"metadata.namespace", "", "team"},
		"its UID":                           {"metadata.uid", "", "u-1"},
		"one label":                         {"metadata.labels['b']", "", "2"},
		"one annotation":                    {"metadata.annotations['note']", "", `say "hi"`},
		"a label it lacks is empty":         {"metadata.labels['zz']", "", ""},
		"all labels, sorted, quoted":        {"metadata.labels", "", "a=\"1\"\nb=\"2\""},
		"all annotations, escaped":          {"metadata.annotations", "", `note="say \"hi\""`},
		"its node":                          {"spec.nodeName", "", "cluster-node"},
		"its service account":               {"spec.serviceAccountName", "", "sa"},
		"the pod IP is the node's address":  {"status.podIP", "127.0.0.1", "127.0.0.1"},
		"the host IP is the node's address": {"status.hostIP", "127.0.0.1", "127.0.0.1"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Field(pod, c.path, c.podIP)
			if err != nil || got != c.want {
				t.Fatalf("Field(%s) = %q, %v; want %q", c.path, got, err, c.want)
			}
		})
	}
	if _, err := Field(pod, "status.podIP", ""); !errors.Is(err, ErrNotKnown) {
		t.Errorf("status.podIP before the pod has an IP: %v, want ErrNotKnown", err)
	}
	if _, err := Field(pod, "spec.containers", "127.0.0.1"); err == nil {
		t.Error("an unsupported path resolved")
	}
}
