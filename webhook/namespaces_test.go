package webhook

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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

// Pods arriving together in one namespace apply their shadows' namespace once; when it was
// deleted meanwhile, the write that finds it gone has it applied again, and the shadow with it.
func TestShadowNamespaceIsAppliedOnceUntilItIsGone(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var (
		mu            sync.Mutex
		applied       = map[string]int{}
		namespaceGone bool
	)
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(_ context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
			kind := obj.(interface{ GetKind() string }).GetKind()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case kind == "Namespace":
				namespaceGone = false
			case namespaceGone:
				return apierrors.NewNotFound(corev1.Resource("namespaces"), "user-shadow")
			}
			applied[kind]++
			return nil
		},
	}).Build()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a := &Applier{client: c, reader: c, scheme: scheme, metrics: m}
	shadow := func(name string) *inject.Shadow {
		return &inject.Shadow{
			Namespace:  &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "user-shadow"}},
			Service:    &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "user-shadow"}},
			Deployment: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "user-shadow"}},
		}
	}
	for _, name := range []string{"shadow-a", "shadow-b", "shadow-c"} {
		if _, err := a.Apply(context.Background(), shadow(name), false); err != nil {
			t.Fatal(err)
		}
	}
	if applied["Namespace"] != 1 || applied["Service"] != 3 || applied["Deployment"] != 3 {
		t.Errorf("applied %v, want the namespace once and each shadow's objects", applied)
	}

	namespaceGone = true
	if _, err := a.Apply(context.Background(), shadow("shadow-d"), false); err != nil {
		t.Fatalf("the shadow was not applied once its namespace was gone: %v", err)
	}
	if applied["Namespace"] != 2 || applied["Service"] != 4 || applied["Deployment"] != 4 {
		t.Errorf("applied %v, want the namespace applied again, then the shadow", applied)
	}
}
