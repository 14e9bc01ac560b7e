package webhook

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/interlink-hq/shadowgate/validate"
)

func newTestReconciler(grace time.Duration) *Reconciler {
	return &Reconciler{grace: grace, gone: map[types.UID]time.Time{}, orphaned: map[types.UID]time.Time{}}
}

// A shadow whose pod was never seen waits the grace period from when it was first found
// orphaned; one whose pod was seen deleted goes at once.
func TestOrphanWait(t *testing.T) {
	r := newTestReconciler(2 * time.Minute)
	now := time.Now()
	if w := r.orphanWait("never-stored", now); w != 2*time.Minute {
		t.Errorf("first sight: wait %s", w)
	}
	if w := r.orphanWait("never-stored", now.Add(90*time.Second)); w != 30*time.Second {
		t.Errorf("later: wait %s", w)
	}
	if w := r.orphanWait("never-stored", now.Add(3*time.Minute)); w > 0 {
		t.Errorf("after the grace period: wait %s", w)
	}
	r.podDeleted("deleted")
	if w := r.orphanWait("deleted", now); w > 0 {
		t.Errorf("a pod seen deleted: wait %s", w)
	}
}

// A shadow found orphaned before its pod was stored is not counted as orphaned once the
// pod shows up, so a later orphaning starts a fresh grace period.
func TestAdoptedShadowStartsAFreshGracePeriod(t *testing.T) {
	r := newTestReconciler(time.Minute)
	now := time.Now()
	r.orphanWait("uid", now)
	r.adopted("uid")
	if w := r.orphanWait("uid", now.Add(10*time.Minute)); w != time.Minute {
		t.Errorf("wait %s, want a full grace period", w)
	}
}

func TestPruneForgetsWhatNoLongerMatters(t *testing.T) {
	r := newTestReconciler(time.Minute)
	now := time.Now()
	r.gone["old"] = now.Add(-2 * time.Minute)
	r.gone["new"] = now
	r.orphaned["old"] = now.Add(-3 * time.Minute)
	r.orphaned["new"] = now.Add(-90 * time.Second)
	r.prune(now)
	if _, ok := r.gone["old"]; ok {
		t.Error("kept a deletion older than the grace period")
	}
	if _, ok := r.orphaned["old"]; ok {
		t.Error("kept an orphan older than twice the grace period")
	}
	if _, ok := r.gone["new"]; !ok {
		t.Error("forgot a recent deletion")
	}
	if _, ok := r.orphaned["new"]; !ok {
		t.Error("forgot an orphan still within twice the grace period")
	}
}

func TestSplitKey(t *testing.T) {
	for key, want := range map[string]bool{"user/trainer": true, "user/": false, "/trainer": false, "trainer": false} {
		if _, _, ok := splitKey(key); ok != want {
			t.Errorf("%q: ok %v", key, ok)
		}
	}
}

// The pod watch passes what the webhooks' matchConditions send, and nothing else.
func TestMayHaveShadowMirrorsTheMatchConditions(t *testing.T) {
	pod := func(annotations map[string]string, tolerations ...corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: corev1.PodSpec{Tolerations: tolerations}}
	}
	for sentence, c := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"a pod with an interlink.eu annotation":            {pod(map[string]string{"interlink.eu/pod-vpn": "true"}), true},
		"a pod with a pre-exec annotation":                 {pod(map[string]string{validate.AnnotationPreExec: "true"}), true},
		"a pod tolerating the virtual node's taint":        {pod(nil, corev1.Toleration{Key: validate.TolerationVirtualNode, Operator: corev1.TolerationOpExists}), true},
		"a pod tolerating every taint":                     {pod(nil, corev1.Toleration{Operator: corev1.TolerationOpExists}), true},
		"a pod with other annotations and tolerations":     {pod(map[string]string{"example.com/x": "y"}, corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists}), false},
		"a pod with an empty-key toleration that is Equal": {pod(nil, corev1.Toleration{Operator: corev1.TolerationOpEqual}), false},
	} {
		if got := mayHaveShadow(c.pod); got != c.want {
			t.Errorf("%s: %v, want %v", sentence, got, c.want)
		}
	}
}

// Two reconciles of one pod can race to delete the same object: only the one whose call
// deleted it says so, and the other's NotFound is no error.
func TestDeleteObjectSaysWhetherItDeleted(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shadow-trainer-user-node", Namespace: "user-shadow"}}
	r := newTestReconciler(time.Minute)
	r.client = fake.NewClientBuilder().WithObjects(cm.DeepCopy()).Build()
	stored := &corev1.ConfigMap{}
	if err := r.client.Get(t.Context(), client.ObjectKeyFromObject(cm), stored); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		deleted, err := r.deleteObject(t.Context(), stored.DeepCopy())
		if err != nil || deleted != want {
			t.Errorf("delete %d: got deleted=%v, err=%v; want deleted=%v and no error", i+1, deleted, err, want)
		}
	}
}
