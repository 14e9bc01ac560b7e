package applier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/validate"
)

// The apply body carries what the object sets, its kind, and not the zero creation timestamp
// and empty status a typed object always has, which the field manager would otherwise own.
func TestToApplySendsOnlyWhatTheObjectSets(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	u, err := ToApply(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "shadow", Namespace: "user-shadow"}}, scheme)
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

func TestCredentialCopiesCarryContentMarkerAndCreatedByOnly(t *testing.T) {
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hpc-ssh-key", Namespace: "shadowgate-system", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"team": "hpc"}, Annotations: map[string]string{"note": "x"}},
		Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{"id_ed25519": []byte("key")},
	}
	c := copyOf(src, "user-shadow", "shadowgate-system/hpc-ssh-key").(*corev1.Secret)
	if c.Namespace != "user-shadow" || c.UID != "" || c.ResourceVersion != "" ||
		len(c.Labels) != 1 || c.Labels[inject.LabelCreatedByShadowgate] != "true" ||
		len(c.Annotations) != 1 || c.Annotations[validate.AnnotationReplicatedFrom] != "shadowgate-system/hpc-ssh-key" {
		t.Errorf("copy metadata: %+v", c.ObjectMeta)
	}
	if c.Type != src.Type || string(c.Data["id_ed25519"]) != "key" {
		t.Errorf("copy content: %v %v", c.Type, c.Data)
	}
	if !SameContent(src, c) {
		t.Error("a copy does not have the same content as its source")
	}
	other := c.DeepCopy()
	other.Data["id_ed25519"] = []byte("another key")
	if SameContent(src, other) {
		t.Error("different data counts as the same content")
	}
	other = c.DeepCopy()
	other.Type = corev1.SecretTypeOpaque
	if SameContent(src, other) {
		t.Error("a different Secret type counts as the same content")
	}
	cmA := &corev1.ConfigMap{Data: map[string]string{"known_hosts": "a"}}
	cmB := &corev1.ConfigMap{Data: map[string]string{"known_hosts": "a"}, BinaryData: map[string][]byte{"x": {1}}}
	if SameContent(cmA, cmB) || !SameContent(cmA, cmA.DeepCopy()) {
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
	a := meteredApplier(t, c, scheme)
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
	err := c.Get(context.Background(), client.ObjectKeyFromObject(s.NodeConfigMap), &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the node ConfigMap the failed request created is still there: %v", err)
	}
}

// nodeConfigMap is the node ConfigMap of pod user/trainer's shadow as BuildShadow makes it
// for the pod with UID uid, compute-node empty.
func nodeConfigMap(uid string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer-user-node", Namespace: "user-shadow",
			Labels:      map[string]string{inject.LabelManagedBy: FieldManager, inject.LabelPodUID: uid, validate.LabelShadowRole: validate.ShadowRoleNode},
			Annotations: map[string]string{inject.AnnotationShadowFor: "user/trainer"}},
		Data: map[string]string{validate.ComputeNodeKey: ""},
	}
}

// nodeConfigMapApplier is an Applier on a fake API server holding existing, the node
// ConfigMap an earlier admission left with the virtual kubelet's compute-node.
func nodeConfigMapApplier(t *testing.T, existing *corev1.ConfigMap, funcs interceptor.Funcs) (*Applier, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(existing).WithInterceptorFuncs(funcs).Build()
	return &Applier{client: c, reader: c, scheme: scheme}, c
}

// vkReported is the node ConfigMap of the pod with UID uid once the virtual kubelet has
// reported its job's node, with a label someone else added.
func vkReported(uid, node string) *corev1.ConfigMap {
	cm := nodeConfigMap(uid)
	cm.Labels["team"] = "hpc"
	cm.Data[validate.ComputeNodeKey] = node
	return cm
}

func computeNode(t *testing.T, c client.Client) *corev1.ConfigMap {
	t.Helper()
	got := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(nodeConfigMap("")), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// A pod deleted and created again under its name before the reconciler removed the earlier
// pod's shadow finds that pod's node ConfigMap: its compute-node, where the earlier job ran,
// is reset and the ConfigMap carries the new pod's metadata alone. It is not recorded as
// created: a failed request leaves it, as it did not bring it into being. A dry run changes
// nothing.
func TestNodeConfigMapOfAnEarlierPodOfTheSameNameHasItsComputeNodeReset(t *testing.T) {
	for _, dryRun := range []bool{true, false} {
		a, c := nodeConfigMapApplier(t, vkReported("earlier-uid", "node042"), interceptor.Funcs{})
		created := &createdObjects{}
		if err := a.createNodeConfigMap(context.Background(), nodeConfigMap("new-uid"), dryRun, created); err != nil {
			t.Fatal(err)
		}
		if n := len(created.list()); n != 0 {
			t.Errorf("dry run %v: %d objects recorded as created, want none", dryRun, n)
		}
		got := computeNode(t, c)
		node, uid, team := got.Data[validate.ComputeNodeKey], got.Labels[inject.LabelPodUID], got.Labels["team"]
		switch {
		case dryRun && (node != "node042" || uid != "earlier-uid"):
			t.Errorf("a dry run changed the ConfigMap: compute-node %q, pod-uid %q", node, uid)
		case !dryRun && (node != "" || uid != "new-uid" || team != "" || got.Annotations[inject.AnnotationShadowFor] != "user/trainer"):
			t.Errorf("compute-node %q, labels %v, annotations %v: want compute-node empty and the new pod's metadata", node, got.Labels, got.Annotations)
		}
	}
}

// The node ConfigMap of the same pod (a second admission, the reconciler's re-apply) keeps
// the compute-node the virtual kubelet wrote for this pod's job.
func TestNodeConfigMapOfTheSamePodKeepsTheComputeNodeTheVirtualKubeletWrote(t *testing.T) {
	written := false
	a, c := nodeConfigMapApplier(t, vkReported("same-uid", "node07"), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			written = true
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	if err := a.createNodeConfigMap(context.Background(), nodeConfigMap("same-uid"), false, &createdObjects{}); err != nil {
		t.Fatal(err)
	}
	if got := computeNode(t, c); written || got.Data[validate.ComputeNodeKey] != "node07" {
		t.Errorf("compute-node %q (reset written: %v), want node07 kept", got.Data[validate.ComputeNodeKey], written)
	}
}

// An earlier pod's node ConfigMap deleted between the read and the reset is created again,
// and recorded: this request brought it into being. One that keeps changing under the reset
// is reported, naming it, after a few rounds.
func TestNodeConfigMapChangedDuringItsResetIsTakenAgain(t *testing.T) {
	deleteIt := interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if err := c.Delete(ctx, obj); err != nil {
			return err
		}
		return c.Patch(ctx, obj, patch, opts...) // NotFound
	}}
	a, c := nodeConfigMapApplier(t, vkReported("earlier-uid", "node042"), deleteIt)
	created := &createdObjects{}
	if err := a.createNodeConfigMap(context.Background(), nodeConfigMap("new-uid"), false, created); err != nil {
		t.Fatal(err)
	}
	if got := computeNode(t, c); got.Data[validate.ComputeNodeKey] != "" || got.Labels[inject.LabelPodUID] != "new-uid" || len(created.list()) != 1 {
		t.Errorf("compute-node %q, pod-uid %q, %d recorded as created: want it created again, empty, and recorded",
			got.Data[validate.ComputeNodeKey], got.Labels[inject.LabelPodUID], len(created.list()))
	}

	// Another writer changes it between each read and reset: the reset, at the version read,
	// is refused with a Conflict.
	writes := 0
	a, c = nodeConfigMapApplier(t, vkReported("earlier-uid", "node042"), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes++
			changed := vkReported("earlier-uid", fmt.Sprintf("node%03d", writes))
			if err := c.Update(ctx, changed); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	err := a.createNodeConfigMap(context.Background(), nodeConfigMap("new-uid"), false, &createdObjects{})
	if !apierrors.IsConflict(err) || writes != writeRounds ||
		!strings.Contains(err.Error(), `configmaps "user-shadow/trainer-user-node"`) || !strings.Contains(err.Error(), "changed 3 times") {
		t.Errorf("after %d resets: %v; want a Conflict naming the ConfigMap after %d", writes, err, writeRounds)
	}
	if got := computeNode(t, c); got.Labels[inject.LabelPodUID] != "earlier-uid" {
		t.Errorf("a reset refused at an older version was written: pod-uid %q", got.Labels[inject.LabelPodUID])
	}
}

// The front door is applied with the rest of the shadow, as the API server knows its kinds
// (an Ingress, a Gateway API HTTPRoute), before the Deployment.
func TestTheFrontDoorIsAppliedWithTheShadow(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := gatewayv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var applied []string
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(_ context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
			u := obj.(interface{ GetObjectKind() schema.ObjectKind }) // an unstructured object's
			mu.Lock()
			defer mu.Unlock()
			gvk := u.GetObjectKind().GroupVersionKind()
			applied = append(applied, gvk.GroupVersion().String()+" "+gvk.Kind)
			return nil
		},
	}).Build()
	a := meteredApplier(t, c, scheme)
	meta := metav1.ObjectMeta{Name: "shadow", Namespace: "user-shadow"}
	s := &inject.Shadow{
		Ingress:    &networkingv1.Ingress{ObjectMeta: meta},
		HTTPRoutes: []*gatewayv1.HTTPRoute{{ObjectMeta: metav1.ObjectMeta{Name: "shadow-8888", Namespace: "user-shadow"}}},
		Deployment: &appsv1.Deployment{ObjectMeta: meta},
	}
	if _, err := a.Apply(t.Context(), s, false); err != nil {
		t.Fatal(err)
	}
	if len(applied) != 3 || applied[2] != "apps/v1 Deployment" ||
		!slices.Contains(applied, "networking.k8s.io/v1 Ingress") || !slices.Contains(applied, "gateway.networking.k8s.io/v1 HTTPRoute") {
		t.Errorf("applied %v, want the Ingress and the HTTPRoute, then the Deployment", applied)
	}
}

// meteredApplier is an Applier over c, with scheme and metrics of its own.
func meteredApplier(t *testing.T, c client.WithWatch, scheme *runtime.Scheme) *Applier {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return &Applier{client: c, reader: c, scheme: scheme, metrics: m}
}
