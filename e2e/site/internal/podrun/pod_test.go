package podrun

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
)

func TestInitContainerHandsAFileToTheContainerThroughAnEmptyDir(t *testing.T) {
	init := sh("writer", "echo handed-over > /handover-test/note")
	init.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/handover-test"}}
	main := sh("reader", "cat /handover-test/note")
	main.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/handover-test"}}
	pod := testPod("handover", corev1.PodSpec{
		RestartPolicy:  corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{init},
		Containers:     []corev1.Container{main},
		Volumes:        []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	})
	if _, err := os.Stat("/handover-test"); err == nil {
		t.Fatal("/handover-test exists on the host before the test: the test needs a mountPath the host lacks")
	}
	p := run(t, newWorld(), pod)
	eventually(t, "pod succeeded", func() bool { return p.Status().Phase == corev1.PodSucceeded })
	out := logsOf(t, p, "reader", api.ContainerLogOpts{})
	if !strings.HasPrefix(out, "handed-over\n") {
		t.Fatalf("reader saw %q, want the init container's note", out)
	}
	p.Stop(time.Second)
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/handover-test"); err == nil {
		t.Errorf("/handover-test, created on the host as the mount target, is left behind after the pod")
	}
}
