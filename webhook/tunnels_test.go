package webhook

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// A pod labelled and annotated as another tenant's shadow pod is not believed: only a pod in
// the shadow Deployment's namespace, selected by it, owned by one of its ReplicaSets and
// labelled with the claimed pod's UID reports on that pod.
func TestTheTunnelReporterBelievesOnlyTheShadowsOwnPod(t *testing.T) {
	const shadowName, shadowNS = "notebook-user", "user-shadow"
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "user", UID: "victim-uid"}}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: shadowName, Namespace: shadowNS,
			Labels:      map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelPodUID: "victim-uid"},
			Annotations: map[string]string{inject.AnnotationShadowFor: "user/notebook"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"interlink.eu/shadow": shadowName}}},
	}
	shadowPod := func(name, ns string, uid string, owner string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelPodUID: uid, "interlink.eu/shadow": shadowName},
			Annotations: map[string]string{inject.AnnotationShadowFor: "user/notebook"}}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner, UID: "rs", Controller: ptr.To(true)}}
		}
		return p
	}
	for name, tc := range map[string]struct {
		pods []client.Object
		want string // the shadow pod believed, "" for none
	}{
		"A look-alike in the attacker's own namespace is not believed.": {
			pods: []client.Object{shadowPod("evil", "evil", "victim-uid", shadowName+"-abc")},
		},
		"A look-alike in the shadow namespace that no ReplicaSet of the shadow owns is not believed.": {
			pods: []client.Object{shadowPod("loose", shadowNS, "victim-uid", "")},
		},
		"A pod of the shadow Deployment with another pod's UID is not believed.": {
			pods: []client.Object{shadowPod("other", shadowNS, "other-uid", shadowName+"-abc")},
		},
		"The shadow Deployment's own pod is believed.": {
			pods: []client.Object{shadowPod("evil", "evil", "victim-uid", shadowName+"-abc"), shadowPod(shadowName+"-abc-xyz", shadowNS, "victim-uid", shadowName+"-abc")},
			want: shadowName + "-abc-xyz",
		},
	} {
		t.Run(name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(scheme).
				WithObjects(append([]client.Object{victim, deployment}, tc.pods...)...).
				WithIndex(&appsv1.Deployment{}, indexShadowFor, shadowForIndex).
				WithIndex(&corev1.Service{}, indexShadowFor, shadowForIndex).
				WithIndex(&corev1.ConfigMap{}, indexShadowFor, shadowForIndex).
				WithIndex(&networkingv1.NetworkPolicy{}, indexShadowFor, shadowForIndex).
				Build()
			r := &TunnelReporter{cache: c, policies: fixedPolicy{&policy.Policy{}}}
			sh, err := r.shadowOf(context.Background(), victim)
			if err != nil || sh == nil {
				t.Fatalf("shadowOf: %v, %v", sh, err)
			}
			got := ""
			if sh.pod != nil {
				got = sh.pod.Name
			}
			if got != tc.want {
				t.Errorf("believed shadow pod %q, want %q", got, tc.want)
			}
		})
	}
}
