package shadows

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

func TestSplitKey(t *testing.T) {
	for key, want := range map[string]bool{"user/trainer": true, "user/": false, "/trainer": false, "trainer": false} {
		if _, _, ok := SplitKey(key); ok != want {
			t.Errorf("%q: ok %v", key, ok)
		}
	}
}

// The pod watch passes what the webhooks' matchConditions send, and of the pods they send
// for their spec.nodeName alone, only those on a virtual node the policy lists.
func TestMayHaveShadowMirrorsTheMatchConditions(t *testing.T) {
	pod := func(annotations map[string]string, tolerations ...corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: corev1.PodSpec{Tolerations: tolerations}}
	}
	onNode := func(node string) *corev1.Pod {
		p := pod(nil)
		p.Spec.NodeName = node
		return p
	}
	isVirtualNode := func(name string) bool { return name == "hpc-vk" }
	for sentence, c := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"a pod with an interlink.eu annotation":                 {pod(map[string]string{"interlink.eu/pod-vpn": "true"}), true},
		"a shadow pod, with shadow-for only":                    {pod(map[string]string{inject.AnnotationShadowFor: "user/trainer"}), false},
		"a pod with shadow-for and another interlink.eu":        {pod(map[string]string{inject.AnnotationShadowFor: "user/trainer", "interlink.eu/pod-vpn": "true"}), true},
		"a pod with a pre-exec annotation":                      {pod(map[string]string{validate.AnnotationPreExec: "true"}), true},
		"a pod tolerating the virtual node's taint":             {pod(nil, corev1.Toleration{Key: validate.TolerationVirtualNode, Operator: corev1.TolerationOpExists}), true},
		"a pod tolerating every taint":                          {pod(nil, corev1.Toleration{Operator: corev1.TolerationOpExists}), true},
		"a pod with other annotations and tolerations":          {pod(map[string]string{"example.com/x": "y"}, corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists}), false},
		"a pod with an empty-key toleration that is Equal":      {pod(nil, corev1.Toleration{Operator: corev1.TolerationOpEqual}), false},
		"a pod bound to a listed virtual node by spec.nodeName": {onNode("hpc-vk"), true},
		"a pod bound to an ordinary node":                       {onNode("worker-1"), false},
	} {
		if got := MayHaveShadow(c.pod, isVirtualNode); got != c.want {
			t.Errorf("%s: %v, want %v", sentence, got, c.want)
		}
	}
}

// Only an update that moves a pod into Succeeded or Failed wakes the reconciler; every other
// pod update is ignored, as before.
func TestPhaseEndedSeesOnlyTheMoveIntoATerminalPhase(t *testing.T) {
	inPhase := func(phase corev1.PodPhase) *corev1.Pod { return &corev1.Pod{Status: corev1.PodStatus{Phase: phase}} }
	for _, c := range []struct {
		from, to corev1.PodPhase
		want     bool
	}{
		{corev1.PodRunning, corev1.PodSucceeded, true},
		{corev1.PodPending, corev1.PodFailed, true},
		{"", corev1.PodSucceeded, true},
		{corev1.PodPending, corev1.PodRunning, false},
		{corev1.PodRunning, corev1.PodRunning, false},
		{corev1.PodSucceeded, corev1.PodSucceeded, false}, // a later update of a finished pod
		{corev1.PodFailed, corev1.PodFailed, false},
	} {
		if got := PhaseEnded(inPhase(c.from), inPhase(c.to)); got != c.want {
			t.Errorf("%q to %q: %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if PhaseEnded(&corev1.ConfigMap{}, inPhase(corev1.PodSucceeded)) {
		t.Error("an update of something other than a pod")
	}
}

// A shadow pod has started once one of its containers runs or has exited 0: a queued job's
// shadow runs its wait-for-node alone; one whose image does not pull has none.
func TestStarted(t *testing.T) {
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	done := corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}
	failed := corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	pulling := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}
	pod := func(inits, containers []corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: inits, ContainerStatuses: containers}}
	}
	for sentence, c := range map[string]struct {
		pods []*corev1.Pod
		want bool
	}{
		"A queued job's shadow, its wait-for-node running, has started.":     {[]*corev1.Pod{pod([]corev1.ContainerStatus{running}, []corev1.ContainerStatus{pulling})}, true},
		"A shadow past its init container, its tunnel failing, has started.": {[]*corev1.Pod{pod([]corev1.ContainerStatus{done}, []corev1.ContainerStatus{failed})}, true},
		"A shadow whose image does not pull has not started.":                {[]*corev1.Pod{pod([]corev1.ContainerStatus{pulling}, []corev1.ContainerStatus{pulling})}, false},
		"A shadow whose every container failed has not started.":             {[]*corev1.Pod{pod(nil, []corev1.ContainerStatus{failed})}, false},
		"No pod has not started.":                                            {nil, false},
		"Two pods, one of which has not started, have not started.":          {[]*corev1.Pod{pod(nil, []corev1.ContainerStatus{running}), pod(nil, nil)}, false},
	} {
		if got := Started(c.pods); got != c.want {
			t.Errorf("%s Started: %v", sentence, got)
		}
	}
}
