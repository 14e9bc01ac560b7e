package validate_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

func TestWorkloadTemplates(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	bad := podOn("hpc-vk", ann(validate.AnnotationReverseBind, "127.0.0.1", fwd, "minio:9000"))
	tmpl := corev1.PodTemplateSpec{ObjectMeta: bad.ObjectMeta, Spec: bad.Spec}
	meta := metav1.ObjectMeta{Name: "w", Namespace: "user"}
	at := func(p *field.Path) string {
		return p.Child("metadata", "annotations").Key(validate.AnnotationReverseBind).String()
	}
	spec := field.NewPath("spec", "template")
	cases := map[string]struct {
		obj  runtime.Object
		path string
	}{
		"a Deployment reports under spec.template":  {obj: &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: tmpl}}, path: at(spec)},
		"a StatefulSet reports under spec.template": {obj: &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Template: tmpl}}, path: at(spec)},
		"a DaemonSet reports under spec.template":   {obj: &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Template: tmpl}}, path: at(spec)},
		"a ReplicaSet reports under spec.template":  {obj: &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Template: tmpl}}, path: at(spec)},
		"a Job reports under spec.template":         {obj: &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: tmpl}}, path: at(spec)},
		"a CronJob reports under spec.jobTemplate.spec.template": {obj: &batchv1.CronJob{ObjectMeta: meta,
			Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}},
			path: at(field.NewPath("spec", "jobTemplate", "spec", "template"))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, judged := validate.Object(tc.obj, validate.Config{Policy: pol, PolicyRef: validate.PolicyRef{Name: "shadowgate-policy"}, Credentials: validate.CredentialRules{}})
			if !judged {
				t.Fatal("not judged")
			}
			vt.Expect(t, d.Errors, []vt.Err{{Type: field.ErrorTypeInvalid, Field: tc.path, Value: "127.0.0.1"}})
		})
	}
	t.Run("a good template is admitted", func(t *testing.T) {
		good := podOn("hpc-vk", ann(fwd, "minio:9000"))
		d, _ := validate.Object(&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: good.ObjectMeta, Spec: good.Spec}}}, validate.Config{Policy: pol, PolicyRef: validate.PolicyRef{}, Credentials: validate.CredentialRules{}})
		vt.Expect(t, d.Errors, nil)
	})
	t.Run("other kinds are not judged", func(t *testing.T) {
		if _, judged := validate.Object(&corev1.Service{}, validate.Config{Policy: pol, PolicyRef: validate.PolicyRef{}, Credentials: validate.CredentialRules{}}); judged {
			t.Error("a Service was judged")
		}
	})
}

// A bind address in a template is shared by every pod created from it, so their jobs collide
// on a node; a Pod's own is its alone.
func TestBindAddressInATemplateWarns(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	withBind := podOn("hpc-vk", ann(fwd, "minio:9000", bind, "127.0.10.1"))
	tmpl := corev1.PodTemplateSpec{ObjectMeta: withBind.ObjectMeta, Spec: withBind.Spec}
	meta := metav1.ObjectMeta{Name: "w", Namespace: "user"}
	cases := map[string]struct {
		obj          runtime.Object
		wantWarnings []string
	}{
		"a Pod's own bind address is admitted without a warning": {obj: withBind},
		"a Deployment's template is warned about, at its path": {obj: &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: tmpl}},
			wantWarnings: []string{"spec.template.metadata.annotations[interlink.eu/reverse-bind] is set in a pod template"}},
		"a CronJob's template is warned about, at its path": {obj: &batchv1.CronJob{ObjectMeta: meta,
			Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}},
			wantWarnings: []string{"spec.jobTemplate.spec.template.metadata.annotations[interlink.eu/reverse-bind] is set in a pod template"}},
		"a template whose bind address is refused gets the error alone": {obj: &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: podOn("hpc-vk", ann(fwd, "minio:9000", bind, "127.0.0.1")).ObjectMeta, Spec: withBind.Spec}}}},
		"a template without a bind address is admitted without a warning": {obj: &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: podOn("hpc-vk", ann(fwd, "minio:9000")).ObjectMeta, Spec: withBind.Spec}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, _ := validate.Object(tc.obj, validate.Config{Policy: pol, PolicyRef: validate.PolicyRef{}, Credentials: validate.CredentialRules{}})
			expectWarnings(t, d.Warnings, tc.wantWarnings)
		})
	}
}

// A DaemonSet's template has no per-node affinity (the controller adds one to each pod it
// creates), so with one virtual node a template with a catch-all toleration is judged as the pod
// it runs there; the pod it runs on an ordinary node belongs to none and is admitted with the
// reverse annotations ignored.
func TestTemplatePlacedByTolerationAlone(t *testing.T) {
	pol := mustPolicy(t, `virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH: {LoginHost: login.hpc.example.org, User: alice, KeySecret: hpc-ssh-key, Reverse: {Enabled: true}}
`)
	badBind := podOn("", ann(fwd, "minio:9000", bind, "127.0.0.1"))
	badBind.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	pinnedTo := func(node string) *corev1.Pod {
		p := badBind.DeepCopy()
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
		return p
	}
	meta := metav1.ObjectMeta{Name: "node-exporter", Namespace: "monitoring"}
	daemonSet := func(p *corev1.Pod) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}}}
	}
	template := field.NewPath("spec", "template", "metadata", "annotations")
	cases := map[string]struct {
		obj          runtime.Object
		wantErrs     []vt.Err
		wantWarnings []string
	}{
		"a DaemonSet template with a catch-all toleration is judged as on the only virtual node": {obj: daemonSet(badBind),
			wantErrs: []vt.Err{{Type: field.ErrorTypeInvalid, Field: template.Key(bind).String(), Value: "127.0.0.1"}}},
		"the DaemonSet's pod pinned to the virtual node is judged": {obj: pinnedTo("hpc-vk"),
			wantErrs: []vt.Err{{Type: field.ErrorTypeInvalid, Field: annPath(bind), Value: "127.0.0.1"}}},
		"the DaemonSet's pod pinned to an ordinary node belongs to none": {obj: pinnedTo("worker-1"), wantWarnings: []string{
			annPath(bind) + " is ignored: the pod is not placed on a virtual node", annPath(fwd) + " is ignored"}},
		"a template whose required affinity excludes the virtual node belongs to none": {obj: daemonSet(pinnedTo("worker-1")),
			wantWarnings: []string{template.Key(bind).String() + " is ignored", template.Key(fwd).String() + " is ignored"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, judged := validate.Object(tc.obj, validate.Config{Policy: pol, PolicyRef: validate.PolicyRef{}, Credentials: validate.CredentialRules{}})
			if !judged {
				t.Fatal("not judged")
			}
			vt.Expect(t, d.Errors, tc.wantErrs)
			if tc.wantErrs == nil {
				expectWarnings(t, d.Warnings, tc.wantWarnings)
			}
		})
	}
}
