package reconciler

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// A pod that lists interlink.eu/front-door-ports is refused by a policy without a
// front door; when the admin turns the front door off, that pod's Ingress must still go.
func TestTheFrontDoorOfAPodThePolicyNowRefusesIsDeleted(t *testing.T) {
	withDoor := func(door string) *policy.Policy {
		cm := shadowtest.ExamplePolicyConfigMap(t, func(doc string) string {
			if door == "" {
				return doc
			}
			return strings.Replace(doc, "  hpc-vk:\n    Network:\n", "  hpc-vk:\n    Network:\n      WildcardDNS: apps.example.org\n      "+door, 1)
		})
		pol, errs := validate.PolicyConfigMap(cm, validate.CredentialRules{})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return pol
	}
	door := withDoor("FrontDoor: {ControllerNamespace: ingress-nginx}\n      IngressClusterIssuer: letsencrypt\n")
	off := withDoor("")
	pod := shadowtest.Pod("trainer", nil)
	pod.Annotations = map[string]string{validate.AnnotationFrontDoorPorts: "8888"}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8888}}
	p := shadowtest.Mutated(t, pod, door)
	p.Status.Phase = corev1.PodRunning
	before := shadowtest.ShadowOf(t, p, door)
	if before.Ingress == nil {
		t.Fatal("no Ingress with the front door")
	}
	b := shadowtest.Client().WithObjects(p, before.NodeConfigMap.DeepCopy(), before.Service.DeepCopy(), before.NetworkPolicy.DeepCopy(),
		before.Deployment.DeepCopy(), before.Ingress.DeepCopy())
	for _, kind := range shadows.Objects(true) {
		b = b.WithIndex(kind, shadows.IndexShadowFor, shadows.ShadowForIndex)
	}
	r := newTestReconciler(time.Hour)
	r.client, r.policies, r.applier, r.recorder = b.Build(), shadowtest.FixedPolicy{Policy: off}, &shadowtest.RecordingApplier{}, &shadowtest.RecordingEvents{}
	r.writer = r.client
	r.identity = shadows.Identity{Cache: r.client, GatewayAPI: true,
		Namespaces: shadowtest.NamespaceLabels{before.Deployment.Namespace: {inject.LabelShadowNamespaceFor: p.Namespace}}}
	if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
		t.Fatal(err)
	}
	if err := r.client.Get(t.Context(), client.ObjectKeyFromObject(before.Ingress), &networkingv1.Ingress{}); err == nil {
		t.Errorf("the front door is off, yet the refused pod's Ingress %s still publishes it", before.Ingress.Name)
	}
}
