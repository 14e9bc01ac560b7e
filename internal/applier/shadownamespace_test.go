package applier

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/interlink-hq/shadowgate/inject"
)

// A shadow namespace is written to only when it is shadowgate's for the pod's namespace: a
// namespace of that name someone else made is refused whole, nothing created in it.
func TestShadowNamespaceIsWrittenOnlyWhenOurs(t *testing.T) {
	cases := map[string]struct {
		existing    map[string]string // labels of the existing user-shadow; nil: none exists
		refused     bool
		markedFor   string
		wantCreated bool
	}{
		"a missing namespace is created, with the marker": {
			wantCreated: true,
		},
		"a namespace without the marker (a tenant's, or the virtual kubelet's) is refused": {
			existing: map[string]string{"team": "a"},
			refused:  true,
		},
		"a namespace marked for another pod namespace is refused": {
			existing:  map[string]string{inject.LabelShadowNamespaceFor: "victim"},
			refused:   true,
			markedFor: "victim",
		},
		"a namespace marked for the pod's namespace (created by shadowgate, or handed over) is used": {
			existing: map[string]string{inject.LabelShadowNamespaceFor: "user"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			b := fake.NewClientBuilder().WithScheme(scheme)
			if tc.existing != nil {
				b = b.WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "user-shadow", Labels: tc.existing}})
			}
			var writes []string
			c := b.WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					writes = append(writes, "create "+obj.GetObjectKind().GroupVersionKind().Kind+" "+obj.GetName())
					return c.Create(ctx, obj, opts...)
				},
				Apply: func(_ context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
					writes = append(writes, "apply")
					return nil
				},
			}).Build()
			a := meteredApplier(t, c, scheme)
			s := &inject.Shadow{
				Namespace: &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
					ObjectMeta: metav1.ObjectMeta{Name: "user-shadow", Labels: map[string]string{inject.LabelShadowNamespaceFor: "user"}}},
				Deployment: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "trainer-user", Namespace: "user-shadow"}},
			}
			_, err := a.Apply(context.Background(), s, false)
			a.Wait()
			var foreign *ForeignNamespaceError
			if tc.refused {
				if !errors.As(err, &foreign) {
					t.Fatalf("want a ForeignNamespaceError, got %v", err)
				}
				if foreign.MarkedFor != tc.markedFor || !apierrors.IsForbidden(err) {
					t.Errorf("refusal %+v forbidden=%v", foreign, apierrors.IsForbidden(err))
				}
				for _, want := range []string{"user-shadow", "kubectl label namespace user-shadow " + inject.LabelShadowNamespaceFor + "=user"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("message %q does not say %q", err, want)
					}
				}
				if len(writes) != 0 {
					t.Errorf("wrote %v into a namespace that is not shadowgate's", writes)
				}
				if a.namespaces.known("user-shadow") {
					t.Error("a refused namespace is remembered: a handover would wait for namespaceMemory")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			created := len(writes) > 0 && writes[0] == "create Namespace user-shadow"
			if created != tc.wantCreated {
				t.Errorf("writes %v, namespace created: %v, want %v", writes, created, tc.wantCreated)
			}
		})
	}
}
