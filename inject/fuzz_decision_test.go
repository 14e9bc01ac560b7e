package inject

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// decideAndRender takes pod the way the webhook does, and fails t where the decision or what it
// renders breaks a property: /validate-pods judges (validate.Pod), /mutate-pods mutates an
// admitted pod (MutatePod) without a warning, as a policy the pod was admitted under can always
// be set up; the mutated pod is admitted again and passes CheckMutated; a second MutatePod
// changes nothing; the shadow's objects have DNS-1123 label names and valid label values; and
// the pre-exec and the shadow hold the shell property (shellproperty_test.go).
func decideAndRender(t *testing.T, pod *corev1.Pod, pol *policy.Policy) {
	o, d := validate.Pod(pod, validate.Config{Policy: pol})
	if !d.Allowed() || o == nil {
		return
	}
	if warnings := mutateInPlace(pod, o); len(warnings) > 0 {
		t.Fatalf("an admitted pod could not be mutated: %q; annotations %q", warnings, pod.Annotations)
	}
	o, d = validate.Pod(pod, validate.Config{Policy: pol})
	if !d.Allowed() {
		t.Fatalf("the mutated pod is refused: %v; annotations %q", d.Errors.ToAggregate(), pod.Annotations)
	}
	if errs := checkMutated(pod, o); len(errs) > 0 {
		t.Fatalf("the mutated pod fails CheckMutated: %v", errs.ToAggregate())
	}
	again := pod.DeepCopy()
	mutateInPlace(again, o)
	if !maps.Equal(again.Annotations, pod.Annotations) {
		t.Fatalf("a second MutatePod changed the pod:\nbefore %q\nafter  %q", pod.Annotations, again.Annotations)
	}
	if o.WantsReverse() {
		if err := checkPreExec(pod, o); err != nil {
			t.Fatal(err)
		}
	}
	shadow, _ := buildShadow(pod, o)
	if shadow == nil {
		return
	}
	for _, obj := range shadow.Objects() {
		for _, name := range []string{obj.GetName(), obj.GetNamespace()} {
			if name == "" && obj == shadow.Namespace {
				continue // a Namespace has no namespace
			}
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				t.Fatalf("%T %s/%s: %q is not a DNS-1123 label: %v", obj, obj.GetNamespace(), obj.GetName(), name, errs)
			}
		}
		for k, v := range obj.GetLabels() {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Fatalf("%T %s: label %s=%q: %v", obj, obj.GetName(), k, v, errs)
			}
		}
	}
	if err := checkContainers(shadow.Deployment, o); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecision puts arbitrary pod JSON, with annotations from the fuzzer, through the webhook's
// decision under the example policy, as the API server would send it to /validate-pods: the
// name and namespace already validated, the UID assigned.
func FuzzDecision(f *testing.F) {
	pol := examplePolicy(f)
	for _, s := range []struct {
		pod                                      string
		forwards, bind, socks, extraPorts, other string
		node                                     uint8
	}{
		{`{"metadata":{"name":"trainer","namespace":"user"},"spec":{"containers":[{"name":"main","ports":[{"containerPort":8888}]}]}}`, "minio:9000", "", "", "", "", 0},
		{`{"metadata":{"name":"trainer","namespace":"user"},"spec":{"containers":[{"name":"main","ports":[{"containerPort":8888},{"containerPort":53,"protocol":"UDP"}]}]}}`, "", "127.0.5.1", "1080", "9090:metrics:TCP,53:dns:UDP", "", 1},
		{`{"metadata":{"name":"a-very-long-pod-name-that-goes-on-and-on-and-on-until-it-is-too-long","namespace":"a-namespace-whose-name-is-also-rather-long-for-a-shadow"},"spec":{}}`, "6443:kubernetes.default.svc:443", "", "", "", "true", 4},
		{`{"metadata":{"name":"p","namespace":"n","annotations":{"slurm-job.vk.io/pre-exec":"# >>> shadowgate: reverse tunnel (added by the admission webhook; do not edit) >>>\nid\n"}},"spec":{"nodeSelector":{"kubernetes.io/hostname":"cern-vk"}}}`, "$(id):9000", "", "", "", "", 2},
		{`{"metadata":{"name":"p","namespace":"n"},"spec":{"containers":[{"ports":[{"containerPort":-1},{"containerPort":70000}]}]}}`, "a:1 a:1", "::ffff:127.0.0.1", "-1", ";id", "yes", 1},
		{`{"spec":{"containers":[1]}}`, "", "", "", "", "", 3},
	} {
		f.Add([]byte(s.pod), s.forwards, s.bind, s.socks, s.extraPorts, s.other, s.node)
	}
	nodes := []string{"hpc-vk", "cern-vk", "", "not-a-virtual-node"}
	f.Fuzz(func(t *testing.T, podJSON []byte, forwards, bind, socks, extraPorts, sameNS string, node uint8) {
		pod := &corev1.Pod{}
		if kjson.UnmarshalCaseSensitivePreserveInts(podJSON, pod) != nil {
			return // the webhook answers a 400
		}
		if len(validation.IsDNS1123Subdomain(pod.Name)) > 0 || len(validation.IsDNS1123Label(pod.Namespace)) > 0 {
			return // the API server refuses these before /validate-pods
		}
		pod.UID = "0b5e3c2a-5d1f-4c1e-9a47-6f0d3f1b2c3d"
		if n := nodes[int(node)%len(nodes)]; n != "" {
			pod.Spec.NodeName = n
		}
		for k, v := range map[string]string{validate.AnnotationReverseForwards: forwards, validate.AnnotationReverseBind: bind,
			validate.AnnotationReverseSocksPort: socks, validate.AnnotationExtraPorts: extraPorts, validate.AnnotationShadowSameNS: sameNS} {
			if v != "" {
				if pod.Annotations == nil {
					pod.Annotations = map[string]string{}
				}
				pod.Annotations[k] = v
			}
		}
		decideAndRender(t, pod, pol)
	})
}
