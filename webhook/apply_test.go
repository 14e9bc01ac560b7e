package webhook

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/interlink-hq/shadowgate/validate"
)

// The apply body carries what the object sets, its kind, and not the zero creation timestamp
// and empty status a typed object always has, which the field manager would otherwise own.
func TestToApplySendsOnlyWhatTheObjectSets(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	u, err := toApply(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "shadow", Namespace: "user-shadow"}}, scheme)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "apps/v1" || u.GetKind() != "Deployment" {
		t.Errorf("kind %s %s", u.GetAPIVersion(), u.GetKind())
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "creationTimestamp"); found {
		t.Error("creationTimestamp sent")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status"); found {
		t.Error("status sent")
	}
}

func TestCredentialCopiesCarryContentAndMarkerOnly(t *testing.T) {
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hpc-ssh-key", Namespace: "shadowgate-system", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"team": "hpc"}, Annotations: map[string]string{"note": "x"}},
		Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{"id_ed25519": []byte("key")},
	}
	c := copyOf(src, "user-shadow", "shadowgate-system/hpc-ssh-key").(*corev1.Secret)
	if c.Namespace != "user-shadow" || c.UID != "" || c.ResourceVersion != "" || c.Labels != nil ||
		len(c.Annotations) != 1 || c.Annotations[validate.AnnotationReplicatedFrom] != "shadowgate-system/hpc-ssh-key" {
		t.Errorf("copy metadata: %+v", c.ObjectMeta)
	}
	if c.Type != src.Type || string(c.Data["id_ed25519"]) != "key" {
		t.Errorf("copy content: %v %v", c.Type, c.Data)
	}
	if !sameContent(src, c) {
		t.Error("a copy does not have the same content as its source")
	}
	other := c.DeepCopy()
	other.Data["id_ed25519"] = []byte("another key")
	if sameContent(src, other) {
		t.Error("different data counts as the same content")
	}
	other = c.DeepCopy()
	other.Type = corev1.SecretTypeOpaque
	if sameContent(src, other) {
		t.Error("a different Secret type counts as the same content")
	}
	cmA := &corev1.ConfigMap{Data: map[string]string{"known_hosts": "a"}}
	cmB := &corev1.ConfigMap{Data: map[string]string{"known_hosts": "a"}, BinaryData: map[string][]byte{"x": {1}}}
	if sameContent(cmA, cmB) || !sameContent(cmA, cmA.DeepCopy()) {
		t.Error("ConfigMap content comparison")
	}
}
