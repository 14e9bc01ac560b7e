package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/internal/shadowtest"
	"github.com/interlink-hq/shadowgate/validate"
)

// The rules themselves are tested in package validate; these check that each endpoint and the
// reconciler keep to them.

// At apply, the policy ConfigMap is refused with the causes validate gives; other ConfigMaps
// are judged as ever, whatever their data.
func TestConfigMapValidatorRefusesAPolicyItCannotCarryOut(t *testing.T) {
	_, _, _, cmV, _ := handlers(t)
	cmV.configs.Fixed.Credentials = validate.CredentialRules{WithoutReplication: true}
	kind := metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	refused := shadowtest.ExamplePolicyConfigMap(t, shadowtest.Unchanged)
	_, errs := validate.PolicyConfigMap(refused, cmV.configs.Fixed.Credentials)
	var want []string
	for _, e := range errs {
		want = append(want, e.Field+": "+e.ErrorBody())
	}
	if len(want) != 2 {
		t.Fatalf("the rules refuse %d nodes of the example policy, want both: %q", len(want), want)
	}
	sameLines(t, causes(t, cmV.Handle(context.Background(), request(t, admissionv1.Create, kind, refused))), want)
	if resp := cmV.Handle(context.Background(), request(t, admissionv1.Create, kind, shadowtest.ExamplePolicyConfigMap(t, shadowtest.ReplicationOff))); !resp.Allowed {
		t.Errorf("refused a policy that replicates nothing: %+v", resp.Result)
	}
	other := refused.DeepCopy()
	other.Name = "not-the-policy"
	if resp := cmV.Handle(context.Background(), request(t, admissionv1.Create, kind, other)); !resp.Allowed {
		t.Errorf("refused a ConfigMap that is not the policy: %+v", resp.Result)
	}
}

// sameNSRefusal is the cause kubectl prints for the notebook with shadow-same-ns in namespace
// user, at the annotations of meta.
func sameNSRefusal(meta *field.Path) string {
	e := field.Forbidden(meta.Child("annotations").Key(validate.AnnotationShadowSameNS),
		"the shadow would live in namespace user and the site's credentials (Secret hpc-ssh-key of virtual node hpc-vk) would be copied there, "+
			"where everyone who can create pods or read Secrets could read them: remove the annotation, and the shadow lives in user-shadow; "+
			"this shadowgate runs with --credentials-in-pod-namespaces=false")
	return e.Field + ": " + e.ErrorBody()
}

// /validate-pods refuses such a pod before it applies anything (this validator has nothing to
// apply with), and /validate-workloads a template whose pods would all be refused, under the
// template's path; both admit them by default.
func TestPodAndWorkloadValidatorsRefuseSecretsInThePodsNamespace(t *testing.T) {
	_, podV, workV, _, _ := handlers(t)
	p := shadowtest.Pod("notebook", map[string]string{validate.AnnotationShadowSameNS: "true"})
	deploy := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "notebooks", Namespace: "user"},
		Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: p.Annotations}, Spec: p.Spec}},
	}
	deployGVK := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	if resp := workV.Handle(context.Background(), request(t, admissionv1.Create, deployGVK, deploy)); !resp.Allowed {
		t.Errorf("by default the template is refused: %+v", resp.Result)
	}
	podV.configs.Fixed.Credentials = validate.CredentialRules{WithoutCopiesInPodNamespaces: true}
	workV.configs.Fixed.Credentials = podV.configs.Fixed.Credentials
	sameLines(t, causes(t, podV.Handle(context.Background(), request(t, admissionv1.Create, podGVK, p))),
		[]string{sameNSRefusal(field.NewPath("metadata"))})
	sameLines(t, causes(t, workV.Handle(context.Background(), request(t, admissionv1.Create, deployGVK, deploy))),
		[]string{sameNSRefusal(field.NewPath("spec", "template", "metadata"))})
}
