package harness

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/interlink-hq/shadowgate/inject"
)

// A pod counts as having its whole shadow only with one object of each kind: three objects
// of the wrong kinds are not a whole shadow, and an object of a pod not stored is an orphan.
func TestAuditWantsEachKindOfTheShadow(t *testing.T) {
	shadowNS := inject.ShadowNamespace("user", false)
	meta := func(name, uid string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: shadowNS, Labels: map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelPodUID: uid}}
	}
	objs := []runtime.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "whole", Namespace: "user", UID: "u1"}},
		&appsv1.Deployment{ObjectMeta: meta("d1", "u1")}, &corev1.Service{ObjectMeta: meta("s1", "u1")}, &corev1.ConfigMap{ObjectMeta: meta("c1", "u1")},
		// Three objects, but two ConfigMaps and no Service.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lopsided", Namespace: "user", UID: "u2"}},
		&appsv1.Deployment{ObjectMeta: meta("d2", "u2")}, &corev1.ConfigMap{ObjectMeta: meta("c2", "u2")}, &corev1.ConfigMap{ObjectMeta: meta("c2b", "u2")},
		&corev1.Service{ObjectMeta: meta("s3", "gone")},
	}
	a, err := Audit(context.Background(), fake.NewClientset(objs...), "user")
	if err != nil {
		t.Fatal(err)
	}
	if a.Pods != 2 || a.Objects != 7 || len(a.Incomplete) != 1 || len(a.Orphans) != 1 {
		t.Fatalf("want 2 pods, 7 objects, lopsided incomplete and one orphan; got %s", a)
	}
	if want := "lopsided (has [ConfigMap ConfigMap Deployment])"; a.Incomplete[0] != want {
		t.Errorf("incomplete: %q, want %q", a.Incomplete[0], want)
	}
}
