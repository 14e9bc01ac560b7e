package inject

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The reconciler renders a stored pod again and rolls its shadow when the hash differs from
// the one applied at admission: what the pod gains once stored (a node, a status, labels,
// the annotations shadowgate and the virtual kubelet write) must not change it, what the
// policy renders must.
func TestTheRenderedHashFollowsThePolicyAndNothingElse(t *testing.T) {
	admitted := func(t *testing.T, policyDoc string, pod *corev1.Pod) string {
		t.Helper()
		s, _ := render(t, policyDoc, pod)
		h := s.Deployment.Annotations[AnnotationRendered]
		if len(h) != 16 {
			t.Fatalf("hash %q, want 16 hex digits", h)
		}
		return h
	}
	base := fmt.Sprintf(sshNode, "true", "ssh")
	pod := func() *corev1.Pod {
		return offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: 8888})
	}
	at := admitted(t, base, pod())

	for sentence, change := range map[string]func(p *corev1.Pod){
		"a label put on the pod since":                     func(p *corev1.Pod) { p.Labels = map[string]string{"team": "physics"} },
		"an annotation of another tool put on the pod":     func(p *corev1.Pod) { p.Annotations = map[string]string{"example.org/owner": "alice"} },
		"the pod's status, as the virtual kubelet sets it": func(p *corev1.Pod) { p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"} },
	} {
		t.Run(sentence+" leaves the hash as it was", func(t *testing.T) {
			p := pod()
			change(p)
			if got := admitted(t, base, p); got != at {
				t.Errorf("hash %s, want %s as at admission", got, at)
			}
		})
	}
	for sentence, policyDoc := range map[string]string{
		"new ExtraOptions":   base + "        ExtraOptions: [ServerAliveInterval=15]\n",
		"a new image":        base + "        Image: ghcr.io/interlink-hq/interlink/ssh-tunnel:0.7.0\n",
		"another login host": strings.Replace(base, "login.hpc.example.org", "login2.hpc.example.org", 1),
		"exec mode":          base + "        ForwardMode: exec\n",
	} {
		t.Run(sentence+" changes the hash", func(t *testing.T) {
			if got := admitted(t, policyDoc, pod()); got == at {
				t.Errorf("hash %s unchanged", got)
			}
		})
	}
}
