package applier

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

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
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
)

// testApplier is an Applier on a fake client whose applies apply answers, counted by kind in
// applied; the credentials' sources are read from the fake client, which holds none.
func testApplier(t *testing.T, apply func(ctx context.Context, kind string) error) (a *Applier, applied func(kind string) int) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		counts = map[string]int{}
	)
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(ctx context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
			kind := obj.(interface{ GetKind() string }).GetKind()
			mu.Lock()
			defer mu.Unlock()
			if err := apply(ctx, kind); err != nil {
				return err
			}
			counts[kind]++
			return nil
		},
		// A missing namespace is created, not applied (Applier.ensureNamespace): counted as
		// one more write of it, and stored, so that the next read finds it.
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if kind := obj.GetObjectKind().GroupVersionKind().Kind; kind == "Namespace" {
				mu.Lock()
				err := apply(ctx, kind)
				if err == nil {
					counts[kind]++
				}
				mu.Unlock()
				if err != nil {
					return err
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	a = meteredApplier(t, c, scheme)
	a.credentialsNamespace = "shadowgate-system"
	return a, func(kind string) int {
		mu.Lock()
		defer mu.Unlock()
		return counts[kind]
	}
}

// shadowIn is a shadow of its own name in namespace user-shadow, without credentials.
func shadowIn(name string) *inject.Shadow {
	return &inject.Shadow{
		Namespace:  &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "user-shadow"}},
		Service:    &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "user-shadow"}},
		Deployment: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "user-shadow"}},
	}
}

// Pods arriving together in one namespace apply their shadows' namespace once; when it was
// deleted meanwhile, the write that finds it gone has it applied again, and the shadow with it.
func TestShadowNamespaceIsAppliedOnceUntilItIsGone(t *testing.T) {
	namespaceGone := false
	a, applied := testApplier(t, func(_ context.Context, kind string) error {
		switch {
		case kind == "Namespace":
			namespaceGone = false
		case namespaceGone:
			return apierrors.NewNotFound(corev1.Resource("namespaces"), "user-shadow")
		}
		return nil
	})
	for _, name := range []string{"shadow-a", "shadow-b", "shadow-c"} {
		if _, err := a.Apply(context.Background(), shadowIn(name), false); err != nil {
			t.Fatal(err)
		}
	}
	if applied("Namespace") != 1 || applied("Service") != 3 || applied("Deployment") != 3 {
		t.Errorf("applied %d namespaces, %d Services, %d Deployments: want the namespace once and each shadow's objects",
			applied("Namespace"), applied("Service"), applied("Deployment"))
	}

	namespaceGone = true
	if _, err := a.Apply(context.Background(), shadowIn("shadow-d"), false); err != nil {
		t.Fatalf("the shadow was not applied once its namespace was gone: %v", err)
	}
	if applied("Namespace") != 2 || applied("Service") != 4 || applied("Deployment") != 4 {
		t.Errorf("applied %d namespaces, %d Services, %d Deployments: want the namespace applied again, then the shadow",
			applied("Namespace"), applied("Service"), applied("Deployment"))
	}
}

// A NotFound for anything but the namespace, here the source of a credential to copy, is the
// pod's refusal: the namespace is not forgotten, and nothing is applied twice.
func TestMissingCredentialSourceIsNotAMissingNamespace(t *testing.T) {
	pol := shadowtest.ExamplePolicy(t)
	p := shadowtest.Mutated(t, shadowtest.Pod("notebook", nil), pol)
	shadow := shadowtest.ShadowOf(t, p, pol)
	if len(shadow.Credentials()) == 0 || shadow.Namespace == nil {
		t.Fatal("the example policy's shadow copies no credential into a namespace of its own")
	}
	a, applied := testApplier(t, func(context.Context, string) error { return nil })
	for range 2 {
		_, err := a.Apply(context.Background(), shadow, false)
		if !apierrors.IsNotFound(err) || IsMissingNamespace(err) {
			t.Fatalf("got %v, want the missing source's NotFound", err)
		}
	}
	if applied("Namespace") != 1 {
		t.Errorf("applied the namespace %d times, want once: a missing Secret is not a missing namespace", applied("Namespace"))
	}
	a.Wait()
}

// A dry run that finds the namespace missing creates nothing, so it is not remembered; one
// that finds it there is.
func TestDryRunRemembersOnlyANamespaceThatExists(t *testing.T) {
	a, applied := testApplier(t, func(context.Context, string) error { return nil })
	for range 2 {
		warnings, err := a.Apply(context.Background(), shadowIn("shadow-a"), true)
		if err != nil || len(warnings) != 1 {
			t.Fatalf("warnings %q, error %v: want the dry run's warning that the namespace does not exist", warnings, err)
		}
	}
	if applied("Namespace") != 2 || applied("Service") != 0 {
		t.Errorf("applied %d namespaces and %d Services, want the missing namespace twice and nothing in it", applied("Namespace"), applied("Service"))
	}
	// Created as a typed object, which the counting Create does not take for shadowgate's.
	if err := a.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "user-shadow"}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.Apply(context.Background(), shadowIn("shadow-a"), true); err != nil {
			t.Fatal(err)
		}
	}
	if applied("Namespace") != 3 || applied("Service") != 2 {
		t.Errorf("applied %d namespaces and %d Services, want the existing namespace once more, then only the shadows", applied("Namespace"), applied("Service"))
	}
}

// The memory itself: how long a namespace is known, and what a full one forgets.
func TestKnownNamespaces(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	fill := func(k *knownNamespaces, prefix string, n int) {
		for i := range n {
			k.add(fmt.Sprintf("%s-%d", prefix, i))
		}
	}
	for sentence, c := range map[string]struct {
		run            func(k *knownNamespaces, now *time.Time)
		known, unknown []string
		remembered     int
	}{
		"a namespace is known until its memory has passed": {
			run: func(k *knownNamespaces, now *time.Time) {
				k.add("early")
				*now = start.Add(time.Second)
				k.add("late")
				*now = start.Add(namespaceMemory)
			},
			known: []string{"late"}, unknown: []string{"early"}, remembered: 2,
		},
		"a forgotten namespace is not known": {
			run:     func(k *knownNamespaces, _ *time.Time) { k.add("gone"); k.forget("gone") },
			unknown: []string{"gone"},
		},
		"a full memory drops the expired and keeps the rest": {
			run: func(k *knownNamespaces, now *time.Time) {
				fill(k, "old", maxKnownNamespaces/2)
				*now = start.Add(namespaceMemory)
				fill(k, "new", maxKnownNamespaces/2)
				k.add("extra")
			},
			known: []string{"new-0", "extra"}, unknown: []string{"old-0"}, remembered: maxKnownNamespaces/2 + 1,
		},
		"a full memory of live namespaces forgets them all": {
			run: func(k *knownNamespaces, _ *time.Time) {
				fill(k, "live", maxKnownNamespaces)
				k.add("extra")
			},
			known: []string{"extra"}, unknown: []string{"live-0"}, remembered: 1,
		},
	} {
		t.Run(sentence, func(t *testing.T) {
			now := start
			k := &knownNamespaces{now: func() time.Time { return now }}
			c.run(k, &now)
			for _, n := range c.known {
				if !k.known(n) {
					t.Errorf("%s is not known", n)
				}
			}
			for _, n := range c.unknown {
				if k.known(n) {
					t.Errorf("%s is known", n)
				}
			}
			if len(k.until) != c.remembered {
				t.Errorf("remembers %d namespaces, want %d", len(k.until), c.remembered)
			}
		})
	}
}
