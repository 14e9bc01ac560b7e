package webhook

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/interlink-hq/shadowgate/inject"

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

// A failed request is answered before its objects are removed: the removal may take as long
// as the API server is slow, and a denial sent after the API server gave up on the webhook
// call is a failurePolicy error, not the message. Wait still sees the removal through.
func TestApplyAnswersBeforeRemovingWhatItCreated(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	release, deleting := make(chan struct{}), make(chan string, 1)
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			return errors.New("the Deployment is refused")
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deleting <- obj.GetName()
			<-release
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a := &Applier{client: c, reader: c, scheme: scheme, metrics: m}
	s := &inject.Shadow{
		NodeConfigMap: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shadow-node", Namespace: "user-shadow"}},
		Deployment:    &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "shadow", Namespace: "user-shadow"}},
	}
	answered := make(chan error)
	go func() { _, err := a.Apply(context.Background(), s, false); answered <- err }()
	select {
	case err := <-answered:
		if err == nil {
			t.Fatal("Apply succeeded though the Deployment was refused")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Apply did not answer while the removal of what it created was held up")
	}
	if name := <-deleting; name != "shadow-node" {
		t.Errorf("removed %s, want the node ConfigMap the request created", name)
	}
	waited := make(chan struct{})
	go func() { a.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a removal was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-waited
	err = c.Get(context.Background(), client.ObjectKeyFromObject(s.NodeConfigMap), &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the node ConfigMap the failed request created is still there: %v", err)
	}
}
