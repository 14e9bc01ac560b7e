package shadowtest

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// FixedPolicy is a Policies that never changes.
type FixedPolicy struct{ Policy *policy.Policy }

// Current implements the Policies of internal/policystore.
func (f FixedPolicy) Current() *policy.Policy { return f.Policy }

// ExamplePolicy is the example policy, parsed with the default credential rules.
func ExamplePolicy(t testing.TB) *policy.Policy {
	t.Helper()
	pol, errs := validate.PolicyConfigMap(ExamplePolicyConfigMap(t, Unchanged), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return pol
}

// Pod is an offloaded pod of namespace user, UID pod-uid, on virtual node hpc-vk.
func Pod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "user", UID: "pod-uid", Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{validate.LabelHostname: "hpc-vk"},
			Containers:   []corev1.Container{{Name: "main", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
		},
	}
}

// ExamplePolicyConfigMap is manifests/examples/policy.yaml with edit applied to its document.
func ExamplePolicyConfigMap(t testing.TB, edit func(doc string) string) *corev1.ConfigMap {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(), "manifests", "examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(b, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[policy.DataKey] = edit(cm.Data[policy.DataKey])
	return cm
}

// ReplicationOff is the example policy with ReplicateCredentials: false on both its nodes.
func ReplicationOff(doc string) string {
	return strings.ReplaceAll(doc, "      SSH:\n", "      SSH:\n        ReplicateCredentials: false\n")
}

// Unchanged is the example policy as it is.
func Unchanged(doc string) string { return doc }

// RecordingApplier records the shadows it is asked to apply, and answers Err.
type RecordingApplier struct {
	Applied []*inject.Shadow
	Err     error
}

// Apply records s and answers Err.
func (a *RecordingApplier) Apply(_ context.Context, s *inject.Shadow, _ bool) ([]string, error) {
	a.Applied = append(a.Applied, s)
	return nil, a.Err
}

// Mutated is p as the mutating webhook stores it, which the reconciler requires.
func Mutated(t *testing.T, p *corev1.Pod, pol *policy.Policy) *corev1.Pod {
	t.Helper()
	p = p.DeepCopy()
	o, d := validate.Pod(p, validate.Config{Policy: pol})
	if !d.Allowed() || o == nil {
		t.Fatalf("the test pod is refused: %v", d.Errors)
	}
	inject.Mutate(p, validate.Config{Policy: pol}).Apply(p)
	return p
}

// ShadowOf is the shadow the validating phase builds for p, which must be mutated already.
func ShadowOf(t *testing.T, p *corev1.Pod, pol *policy.Policy) *inject.Shadow {
	t.Helper()
	a := inject.Admit(p, validate.Config{Policy: pol})
	if !a.Decision.Allowed() {
		t.Fatalf("the test pod is refused: %v", a.Decision.Errors)
	}
	return a.Shadow
}

// RecordingEvents records the reasons of the Events it is given.
type RecordingEvents struct{ Reasons []string }

var _ events.EventRecorder = (*RecordingEvents)(nil)

// Eventf records reason.
func (e *RecordingEvents) Eventf(_ runtime.Object, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	e.Reasons = append(e.Reasons, reason)
}

// NamespaceLabels is a Namespaces of fixed namespaces; any other does not exist.
type NamespaceLabels map[string]map[string]string

// Labels gives the labels of namespace name, or NotFound.
func (n NamespaceLabels) Labels(_ context.Context, name string) (map[string]string, error) {
	l, ok := n[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	return l, nil
}

// MountingDeployment is a shadow Deployment in namespace mounting mounts ("<Kind>/<name>"),
// each in a volume of its own, the Secret ones through a projected volume as the shadow does.
func MountingDeployment(namespace string, mounts ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "shadow"}}
	for _, m := range mounts {
		var v corev1.Volume
		switch kind, name, _ := strings.Cut(m, "/"); kind {
		case "Secret":
			v.Projected = &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}
		default:
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}
		}
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, v)
	}
	return d
}

// root is the repository's top folder, where this file's is internal/shadowtest.
func root() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Client is a fake API client holding objs, with shadowgate's own types: the Tunnel, with its
// status subresource.
func Client(objs ...client.Object) *fake.ClientBuilder {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme) // registering built-in types into a new scheme cannot fail
	_ = v1alpha1.AddToScheme(scheme)
	_ = gatewayv1.Install(scheme)
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.Tunnel{})
}

// TunnelOf is the Tunnel pod's status is in, as a client holds it (nil when there is none).
func TunnelOf(t *testing.T, c client.Reader, pod *corev1.Pod) *v1alpha1.Tunnel {
	t.Helper()
	tunnel := &v1alpha1.Tunnel{}
	err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), tunnel)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if !tunnel.IsFor(pod) {
		t.Fatalf("Tunnel %s/%s is not pod UID %s's: owners %+v", tunnel.Namespace, tunnel.Name, pod.UID, tunnel.OwnerReferences)
	}
	return tunnel
}

// TunnelSaying is pod's Tunnel as shadowgate makes it, with status.
func TunnelSaying(pod *corev1.Pod, status v1alpha1.TunnelStatus) *v1alpha1.Tunnel {
	status.PodUID = pod.UID
	return &v1alpha1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: v1alpha1.TunnelSpec{PodUID: pod.UID}, Status: status}
}
