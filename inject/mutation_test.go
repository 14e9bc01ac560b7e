package inject

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/internal/sshtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

const reversePolicy = `
virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH:
        LoginHost: login.hpc.example.org
        User: alice
        KeySecret: hpc-ssh-key
        Reverse: {Enabled: true, AllowedDestinations: {Namespaces: [default]}, AllowSocks: true}
`

func mustPolicy(t testing.TB, doc string) *policy.Policy {
	t.Helper()
	pol, errs := validate.ParsePolicy([]byte(doc), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatalf("test policy refused: %v", errs.ToAggregate())
	}
	return pol
}

// admit judges pod as the webhook does before and after mutating it.
func admit(t *testing.T, pod *corev1.Pod) *validate.Offload {
	t.Helper()
	o, d := validate.Pod(pod, validate.Config{Policy: mustPolicy(t, reversePolicy)})
	if !d.Allowed() {
		t.Fatalf("test pod refused: %v", d.Errors.ToAggregate())
	}
	return o
}

func reversePod(annotations map[string]string) *corev1.Pod {
	pod := offloadedPod("trainer", "user")
	pod.UID = "" // the mutating phase does not know it
	pod.Annotations = annotations
	return pod
}

func TestMutatePod(t *testing.T) {
	const forwards = "minio.user.svc.cluster.local:9000 6443:kubernetes.default.svc.cluster.local:443"
	for name, c := range map[string]struct {
		annotations map[string]string
		wantBind    string // "" for any chosen one
		wantUser    string // the user's pre-exec, after the snippet
		untouched   bool
	}{
		"a pod with forwards gets a bind address and the snippet": {
			annotations: map[string]string{validate.AnnotationReverseForwards: forwards},
		},
		"a pod with only a SOCKS port gets them too": {
			annotations: map[string]string{validate.AnnotationReverseSocksPort: "1080"},
		},
		"the user's own pre-exec runs after the snippet": {
			annotations: map[string]string{validate.AnnotationReverseForwards: forwards, validate.AnnotationPreExec: "module load cuda\n"},
			wantUser:    "module load cuda\n",
		},
		"a bind address the user gave is kept": {
			annotations: map[string]string{validate.AnnotationReverseForwards: forwards, validate.AnnotationReverseBind: "127.0.10.1"},
			wantBind:    "127.0.10.1",
		},
		"a pod that asks for no reverse tunnel is left alone": {
			annotations: map[string]string{validate.AnnotationPreExec: "module load cuda\n"},
			untouched:   true,
		},
		"a pod without annotations is left alone": {untouched: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := reversePod(c.annotations)
			before := pod.DeepCopy()
			if w := mutateInPlace(pod, admit(t, pod)); len(w) > 0 {
				t.Fatalf("warnings: %v", w)
			}
			if c.untouched {
				if diff := cmp.Diff(before, pod); diff != "" {
					t.Fatalf("the pod changed (-before +after):\n%s", diff)
				}
				return
			}
			bind := pod.Annotations[validate.AnnotationReverseBind]
			if c.wantBind != "" && bind != c.wantBind {
				t.Errorf("bind %q, want %q", bind, c.wantBind)
			}
			if _, errs := validate.ParseBind(bind, field.NewPath("bind")); len(errs) > 0 {
				t.Errorf("the recorded bind address is refused: %v", errs)
			}
			preExec := pod.Annotations[validate.AnnotationPreExec]
			if !strings.HasPrefix(preExec, markerBegin+"\n") || !strings.HasSuffix(preExec, markerEnd+"\n"+c.wantUser) {
				t.Errorf("the pre-exec is not the snippet followed by %q:\n%s", c.wantUser, preExec)
			}
			if !strings.Contains(preExec, "shadowgate_reverse_tunnel '"+bind+"' ") {
				t.Errorf("the snippet does not use the recorded bind address %s", bind)
			}

			// Reinvocation, or render of a rendered pod: judged again, mutated again.
			once := pod.DeepCopy()
			if w := mutateInPlace(pod, admit(t, pod)); len(w) > 0 {
				t.Fatalf("warnings on the second call: %v", w)
			}
			if diff := cmp.Diff(once, pod); diff != "" {
				t.Errorf("the second call changed the pod (-first +second):\n%s", diff)
			}
		})
	}
}

func TestMutatePodReplacesAnEarlierSnippet(t *testing.T) {
	pod := reversePod(map[string]string{
		validate.AnnotationReverseForwards: "minio.user.svc.cluster.local:9000",
		validate.AnnotationReverseBind:     "127.0.10.1",
		validate.AnnotationPreExec:         markerBegin + "\necho an older snippet\n" + markerEnd + "\nmodule load cuda\n",
	})
	mutateInPlace(pod, admit(t, pod))
	preExec := pod.Annotations[validate.AnnotationPreExec]
	if strings.Contains(preExec, "an older snippet") || strings.Count(preExec, markerBegin) != 1 {
		t.Errorf("the older snippet is still there:\n%s", preExec)
	}
	if !strings.HasSuffix(preExec, markerEnd+"\nmodule load cuda\n") {
		t.Errorf("the user's pre-exec is not kept after the snippet:\n%s", preExec)
	}
}

// Another mutating webhook may prepend to the pre-exec after ours ran; the API server then
// invokes ours again, which must find its block where it now is and still add exactly one.
func TestMutatePodAfterAForeignPrefix(t *testing.T) {
	pod := reversePod(map[string]string{
		validate.AnnotationReverseForwards: "minio.user.svc.cluster.local:9000",
		validate.AnnotationPreExec:         "module load cuda\n",
	})
	mutateInPlace(pod, admit(t, pod))
	block := userless(t, pod.Annotations[validate.AnnotationPreExec], "module load cuda\n")
	pod.Annotations[validate.AnnotationPreExec] = "echo foreign\n" + pod.Annotations[validate.AnnotationPreExec]

	mutateInPlace(pod, admit(t, pod))
	want := block + "echo foreign\nmodule load cuda\n"
	if got := pod.Annotations[validate.AnnotationPreExec]; got != want {
		t.Fatalf("pre-exec after reinvocation:\n%s\nwant the snippet once, then the foreign prefix and the user's:\n%s", got, want)
	}
	once := pod.DeepCopy()
	mutateInPlace(pod, admit(t, pod))
	if diff := cmp.Diff(once, pod); diff != "" {
		t.Errorf("a third invocation changed the pod (-second +third):\n%s", diff)
	}
}

// userless returns the snippet block of a pre-exec that is the block followed by user.
func userless(t *testing.T, preExec, user string) string {
	t.Helper()
	block, ok := strings.CutSuffix(preExec, user)
	if !ok || !strings.HasPrefix(block, markerBegin+"\n") || !strings.HasSuffix(block, markerEnd+"\n") {
		t.Fatalf("the pre-exec is not the snippet followed by %q:\n%s", user, preExec)
	}
	return block
}

func TestMutatePodStripsTheSnippetOfAPodThatNoLongerAsksForATunnel(t *testing.T) {
	pod := reversePod(map[string]string{validate.AnnotationReverseForwards: "minio.user.svc.cluster.local:9000", validate.AnnotationPreExec: "module load cuda\n"})
	mutateInPlace(pod, admit(t, pod))
	delete(pod.Annotations, validate.AnnotationReverseForwards)
	pod.Annotations[validate.AnnotationPreExec] = "echo foreign\n" + pod.Annotations[validate.AnnotationPreExec]
	mutateInPlace(pod, admit(t, pod))
	if got, want := pod.Annotations[validate.AnnotationPreExec], "echo foreign\nmodule load cuda\n"; got != want {
		t.Errorf("pre-exec %q, want %q: the snippet would hold the job waiting for a tunnel nobody builds", got, want)
	}
}

func TestMutatePodKeepsAMarkerTheUserWroteFurtherDown(t *testing.T) {
	user := "echo start\n" + markerBegin + "\n"
	pod := reversePod(map[string]string{validate.AnnotationReverseSocksPort: "1080", validate.AnnotationPreExec: user})
	mutateInPlace(pod, admit(t, pod))
	if got := pod.Annotations[validate.AnnotationPreExec]; !strings.HasSuffix(got, markerEnd+"\n"+user) {
		t.Errorf("the user's pre-exec was not kept as it was:\n%s", got)
	}
}

func TestMutatePodThatCannotSetUpTheTunnelStopsTheJob(t *testing.T) {
	sshtest.Require(t, "sh")
	for name, c := range map[string]struct {
		o      func(*testing.T, *corev1.Pod) *validate.Offload
		random io.Reader
	}{
		"no randomness for a bind address": {admit, iotest.ErrReader(bytes.ErrTooLarge)},
		"a value it would have to escape": {func(*testing.T, *corev1.Pod) *validate.Offload {
			return &validate.Offload{Node: policy.Defaults(), Forwards: []validate.Forward{forward(9000, "minio'; reboot; '", "x", 9000)}}
		}, rand.Reader},
	} {
		t.Run(name, func(t *testing.T) {
			pod := reversePod(map[string]string{validate.AnnotationReverseSocksPort: "1080", validate.AnnotationPreExec: "echo user\n"})
			if w := mutateInPlaceWith(pod, c.o(t, pod), c.random); len(w) != 1 || !strings.Contains(w[0], "the job will stop at start") {
				t.Errorf("warnings %v, want one saying the job will stop", w)
			}
			if _, set := pod.Annotations[validate.AnnotationReverseBind]; set {
				t.Error("a bind address was recorded")
			}
			out, err := exec.Command("sh", "-c", pod.Annotations[validate.AnnotationPreExec]+"echo workload started\n").CombinedOutput()
			if err == nil || strings.Contains(string(out), "workload started") || !strings.Contains(string(out), "could not set up this pod's reverse tunnel") {
				t.Errorf("the job went on, or did not say why it stopped: %v\n%s", err, out)
			}
		})
	}
}

func TestChooseBind(t *testing.T) {
	for name, c := range map[string]struct {
		random []byte
		want   string
	}{
		"the lowest draw stays out of 127.0.0.0/16":           {[]byte{0, 0, 0}, "127.1.0.1"},
		"the highest draw stays off .255 and 127.255/16":      {[]byte{253, 255, 253}, "127.254.255.254"},
		"draws past 253 wrap around instead of reaching .255": {[]byte{255, 7, 255}, "127.2.7.2"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := chooseBind(bytes.NewReader(c.random))
			if err != nil || got != netip.MustParseAddr(c.want) {
				t.Errorf("got %v %v, want %s", got, err, c.want)
			}
		})
	}
	t.Run("every address it can choose is one the webhook admits, and none is 127.0.0.1", func(t *testing.T) {
		for a := range 256 {
			for c := range 256 {
				got, _ := chooseBind(bytes.NewReader([]byte{byte(a), 0, byte(c)}))
				if _, errs := validate.ParseBind(got.String(), field.NewPath("bind")); len(errs) > 0 || got.As4()[1] == 0 {
					t.Fatalf("%s from (%d, 0, %d): %v", got, a, c, errs)
				}
			}
		}
	})
}
