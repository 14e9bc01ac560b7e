package inject

import (
	"crypto/rand"
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate"
)

// Mutation is what the mutating phase (/mutate-pods) does to a pod.
type Mutation struct {
	// Annotations are the pod's annotations as the phase leaves them: the relay address in
	// interlink.eu/reverse-bind, the snippet in slurm-job.vk.io/pre-exec. Nil when the pod is
	// left as it is: refused, not offloaded, or already prepared (a reinvocation).
	Annotations map[string]string
	// Warnings are the phase's own; the decision's are said once, by the validating phase.
	Warnings []string
}

// Apply gives pod the mutation's annotations.
func (m Mutation) Apply(pod *corev1.Pod) {
	if m.Annotations != nil {
		pod.Annotations = maps.Clone(m.Annotations)
	}
}

// Mutate is the mutating phase for pod: the decision, and for an admitted pod placed on a
// virtual node the annotations that prepare it for its reverse tunnel. A refused pod is left
// as it is: the validating phase refuses it with every error. pod is not written to.
func Mutate(pod *corev1.Pod, cfg validate.Config) Mutation {
	o, d := validate.Pod(pod, cfg)
	if o == nil || !d.Allowed() {
		return Mutation{}
	}
	annotations, _, warnings := prepare(pod, o, rand.Reader)
	return Mutation{Annotations: annotations, Warnings: warnings}
}

// Admission is what the validating phase (/validate-pods) decides on a pod's CREATE.
type Admission struct {
	// Offload is what the pod asks of its virtual node; nil when it is on none the policy lists.
	Offload *validate.Offload
	// Decision holds every rule's errors, the check that the mutating phase prepared the pod,
	// and the warnings of both and of building the shadow.
	Decision validate.Decision
	// Shadow is what to apply before the pod is stored; nil when the pod is refused or needs
	// none.
	Shadow *Shadow
}

// Admit is the validating phase for a pod being created, as the mutating phase left it: the
// decision by every rule; for an admitted pod on a virtual node, the check that the mutating
// phase prepared it (a pod it skipped would run without its tunnel), then its shadow. The
// webhook, the reconciler and `shadowgate render` all admit through here.
func Admit(pod *corev1.Pod, cfg validate.Config) Admission {
	o, d := validate.Pod(pod, cfg)
	a := Admission{Offload: o, Decision: d}
	if o == nil || !d.Allowed() {
		return a
	}
	if errs := checkMutated(pod, o); len(errs) > 0 {
		a.Decision.Errors = errs
		return a
	}
	shadow, warnings := buildShadow(pod, o)
	a.Decision.Warnings = append(a.Decision.Warnings, warnings...)
	a.Shadow = shadow
	return a
}

// Rendering is a pod taken through both phases.
type Rendering struct {
	// Pod is the pod as the mutating phase leaves it, a copy.
	Pod *corev1.Pod
	Admission
}

// Render takes a pod through both phases as the API server does on its CREATE: Mutate, then
// Admit of the mutated copy. The decision's warnings are both phases', in the order the API
// server shows them. pod is not written to.
func Render(pod *corev1.Pod, cfg validate.Config) Rendering {
	m := Mutate(pod, cfg)
	mutated := pod.DeepCopy()
	m.Apply(mutated)
	r := Rendering{Pod: mutated, Admission: Admit(mutated, cfg)}
	r.Decision.Warnings = append(m.Warnings, r.Decision.Warnings...)
	return r
}
