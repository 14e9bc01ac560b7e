package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/validate"
)

var (
	deploymentGVK = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	replicaSetGVK = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	cronJobGVK    = metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}
)

// offloadedTemplate is a pod template on a virtual node, with a SOCKS port: the example policy
// allows SOCKS on cern-vk and refuses it on hpc-vk, as if the admin had since turned it off.
func offloadedTemplate(node string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "crawler"}, Annotations: map[string]string{validate.AnnotationReverseSocksPort: "1080"}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "crawl", Image: "busybox"}},
		},
	}
}

// deployment is a stored Deployment of offloadedTemplate(node), changed by edits.
func deployment(node string, edits ...func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "crawlers", Namespace: "user", Finalizers: []string{"example.com/hold"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "crawler"}},
			Template: offloadedTemplate(node),
		},
	}
	for _, edit := range edits {
		edit(d)
	}
	return d
}

func replicaSet(replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "crawlers-5d4f8", Namespace: "user", Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptrTo(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "crawler"}},
			Template: offloadedTemplate("hpc-vk"),
		},
	}
}

func cronJob(edits ...func(*batchv1.CronJob)) *batchv1.CronJob {
	tmpl := offloadedTemplate("hpc-vk")
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	c := &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "user"},
		Spec: batchv1.CronJobSpec{
			Schedule:    "0 2 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}},
		},
	}
	for _, edit := range edits {
		edit(c)
	}
	return c
}

func ptrTo[T any](v T) *T { return &v }

// update is an UPDATE request of old to obj, as the API server sends it.
func update(t *testing.T, kind metav1.GroupVersionKind, old, obj any) admission.Request {
	t.Helper()
	req := request(t, admissionv1.Update, kind, obj)
	raw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	req.OldObject = runtime.RawExtension{Raw: raw}
	return req
}

// unchangedWarning is what a warning turned from an error of a template left unchanged says
// after the error.
const unchangedWarning = "; this update is admitted as it leaves the pod template unchanged, " +
	"but the policy in force refuses the template, and every pod made from it, until the template is changed"

// An UPDATE that leaves the pod template as stored is admitted, whatever the policy now says
// of the template (its refusal becomes a warning); one being deleted is admitted whatever
// changed; a changed template, and every CREATE, is judged in full.
func TestWorkloadUpdatesAreJudgedOnlyWhenTheTemplateChanges(t *testing.T) {
	_, _, workV, _, pol := handlers(t)
	const (
		admitted = "admitted without a word"
		warned   = "admitted, with the template's errors as warnings"
		judged   = "judged in full"
	)
	now := metav1.Now()
	for sentence, c := range map[string]struct {
		req  func(t *testing.T) admission.Request
		want string
	}{
		"scaling a Deployment whose template the policy refuses is admitted, with a warning": {want: warned, req: func(t *testing.T) admission.Request {
			return update(t, deploymentGVK, deployment("hpc-vk"), deployment("hpc-vk", func(d *appsv1.Deployment) { d.Spec.Replicas = ptrTo(int32(3)) }))
		}},
		"labelling it is admitted, with a warning": {want: warned, req: func(t *testing.T) admission.Request {
			return update(t, deploymentGVK, deployment("hpc-vk"), deployment("hpc-vk", func(d *appsv1.Deployment) { d.Labels = map[string]string{"team": "physics"} }))
		}},
		"removing its finalizer is admitted, with a warning": {want: warned, req: func(t *testing.T) admission.Request {
			return update(t, deploymentGVK, deployment("hpc-vk"), deployment("hpc-vk", func(d *appsv1.Deployment) { d.Finalizers = nil }))
		}},
		"a template that differs only in how a quantity is written is unchanged": {want: warned, req: func(t *testing.T) admission.Request {
			cpu := func(q string) func(*appsv1.Deployment) {
				return func(d *appsv1.Deployment) {
					d.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
				}
			}
			return update(t, deploymentGVK, deployment("hpc-vk", cpu("1")), deployment("hpc-vk", cpu("1000m")))
		}},
		"a template the policy admits is admitted again without its warnings": {want: admitted, req: func(t *testing.T) admission.Request {
			return update(t, deploymentGVK, deployment("cern-vk"), deployment("cern-vk", func(d *appsv1.Deployment) { d.Spec.Replicas = ptrTo(int32(3)) }))
		}},
		"changing the template's image is judged, and the whole template refused": {want: judged, req: func(t *testing.T) admission.Request {
			return update(t, deploymentGVK, deployment("hpc-vk"), deployment("hpc-vk", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "busybox:1.37" }))
		}},
		"changing a template's labels is a template change": {want: judged, req: func(t *testing.T) admission.Request {
			return update(t, deploymentGVK, deployment("hpc-vk"), deployment("hpc-vk", func(d *appsv1.Deployment) { d.Spec.Template.Labels["tier"] = "batch" }))
		}},
		"adding a refused annotation to an admitted template is refused": {want: judged, req: func(t *testing.T) admission.Request {
			old := deployment("hpc-vk", func(d *appsv1.Deployment) { d.Spec.Template.Annotations = nil })
			return update(t, deploymentGVK, old, deployment("hpc-vk"))
		}},
		"a Deployment being deleted is admitted, even with its template changed": {want: admitted, req: func(t *testing.T) admission.Request {
			old := deployment("hpc-vk", func(d *appsv1.Deployment) { d.DeletionTimestamp = &now })
			return update(t, deploymentGVK, old, deployment("hpc-vk", func(d *appsv1.Deployment) {
				d.DeletionTimestamp, d.Finalizers = &now, nil
				d.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
			}))
		}},
		"the deployment controller scaling a ReplicaSet is admitted, with a warning": {want: warned, req: func(t *testing.T) admission.Request {
			return update(t, replicaSetGVK, replicaSet(1), replicaSet(0))
		}},
		"a CronJob's schedule changed is admitted, with a warning": {want: warned, req: func(t *testing.T) admission.Request {
			return update(t, cronJobGVK, cronJob(), cronJob(func(c *batchv1.CronJob) { c.Spec.Schedule = "0 3 * * *" }))
		}},
		"a CronJob's job spec changed around its pod template is admitted, with a warning": {want: warned, req: func(t *testing.T) admission.Request {
			return update(t, cronJobGVK, cronJob(), cronJob(func(c *batchv1.CronJob) { c.Spec.JobTemplate.Spec.BackoffLimit = ptrTo(int32(2)) }))
		}},
		"a CronJob's pod template changed is judged under spec.jobTemplate.spec.template": {want: judged, req: func(t *testing.T) admission.Request {
			return update(t, cronJobGVK, cronJob(), cronJob(func(c *batchv1.CronJob) { c.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "busybox:1.37" }))
		}},
		"a CREATE is judged in full": {want: judged, req: func(t *testing.T) admission.Request {
			return request(t, admissionv1.Create, deploymentGVK, deployment("hpc-vk"))
		}},
		"a CREATE being deleted is still judged: only an UPDATE can be": {want: judged, req: func(t *testing.T) admission.Request {
			return request(t, admissionv1.Create, deploymentGVK, deployment("hpc-vk", func(d *appsv1.Deployment) { d.DeletionTimestamp = &now }))
		}},
	} {
		req := c.req(t)
		var obj runtime.Object
		switch req.Kind {
		case deploymentGVK:
			obj = &appsv1.Deployment{}
		case replicaSetGVK:
			obj = &appsv1.ReplicaSet{}
		case cronJobGVK:
			obj = &batchv1.CronJob{}
		}
		if err := json.Unmarshal(req.Object.Raw, obj); err != nil {
			t.Fatal(err)
		}
		d, _ := validate.Object(obj, validate.Config{Policy: pol, PolicyRef: workV.configs.Fixed.PolicyRef, Credentials: workV.configs.Fixed.Credentials})
		// Each case has something to say: errors, or for an admitted template warnings.
		if len(d.Errors) == 0 && (c.want != admitted || len(d.Warnings) == 0) {
			t.Fatalf("%s: the policy admits the template without a word; the case is wrong", sentence)
		}
		resp := workV.Handle(context.Background(), req)
		switch c.want {
		case admitted:
			if !resp.Allowed || len(resp.Warnings) > 0 {
				t.Errorf("%s: want %s, got allowed %v, warnings %q, result %+v", sentence, c.want, resp.Allowed, resp.Warnings, resp.Result)
			}
		case warned:
			if !resp.Allowed {
				t.Errorf("%s: refused: %+v", sentence, resp.Result)
				continue
			}
			want := errorLines(d)
			for i := range want {
				want[i] += unchangedWarning
			}
			sameLines(t, resp.Warnings, want)
		case judged:
			if resp.Allowed {
				t.Errorf("%s: admitted, want refused with %q", sentence, errorLines(d))
				continue
			}
			sameLines(t, causes(t, resp), errorLines(d))
		}
	}
}

// An UPDATE's oldObject is read by decodeObject's rules: without it, or unlike what the API
// server sends, the request is a 400 saying what is wrong, not a decision.
func TestWorkloadUpdateReadsTheOldObjectAsStrictlyAsTheObject(t *testing.T) {
	_, _, workV, _, _ := handlers(t)
	stored := deployment("hpc-vk")
	for sentence, c := range map[string]struct {
		oldObject string
		message   string
	}{
		"an UPDATE without an oldObject is refused": {"",
			"the UPDATE request holds no oldObject, the object as stored, to compare the object with"},
		"an oldObject with a duplicate field is refused": {`{"metadata":{"name":"crawlers","name":"other"}}`,
			`the request's oldObject is not what the API server sends: duplicate field "metadata.name"`},
		"an oldObject of another kind is refused": {`{"apiVersion":"apps/v1","kind":"StatefulSet"}`,
			`the request is for "Deployment" (apiVersion "apps/v1"), but its oldObject says it is "StatefulSet" (apiVersion "apps/v1")`},
		"an oldObject that is not a Deployment is refused": {`{"spec":[]}`,
			`the request's oldObject is not a "Deployment" (apiVersion "apps/v1"): `},
	} {
		req := request(t, admissionv1.Update, deploymentGVK, stored)
		req.OldObject = runtime.RawExtension{Raw: []byte(c.oldObject)}
		resp := workV.Handle(context.Background(), req)
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || !strings.HasPrefix(resp.Result.Message, c.message) {
			t.Errorf("%s: want a 400 saying %q, got %+v", sentence, c.message, resp.Result)
		}
	}
}
