package webhook

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// podView is the part of a Pod the pod endpoints decide on: what validate.Pod and inject's
// phases read, and nothing else, so a pod's size beyond that (environment, resources, probes,
// managed fields) costs a skip, not a decode. Nothing is re-encoded from it: /mutate-pods
// patches from the annotations alone (annotationsPatch), so fields this version of the Pod
// type does not know pass through. TestPodViewDecidesAsTheWholePod holds every decision on it
// to the one on the whole Pod; a field the decision comes to read must be added here.
type podView struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        podViewMeta `json:"metadata"`
	Spec            struct {
		NodeName     string              `json:"nodeName"`
		NodeSelector map[string]string   `json:"nodeSelector"`
		Tolerations  []corev1.Toleration `json:"tolerations"`
		// Affinity is the required node affinity alone, which may keep a pod that tolerates
		// the virtual node off it (validate.VirtualNodeFor); the rest, preferred terms and pod
		// (anti-)affinity, is skipped.
		Affinity *struct {
			NodeAffinity *struct {
				Required *corev1.NodeSelector `json:"requiredDuringSchedulingIgnoredDuringExecution"`
			} `json:"nodeAffinity"`
		} `json:"affinity"`
		Containers []struct {
			Name  string                 `json:"name"`
			Ports []corev1.ContainerPort `json:"ports"`
		} `json:"containers"`
		// InitContainers: a native sidecar's (restartPolicy: Always) ports are forwarded.
		InitContainers []struct {
			Name          string                         `json:"name"`
			Ports         []corev1.ContainerPort         `json:"ports"`
			RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy"`
		} `json:"initContainers"`
	} `json:"spec"`
}

// podViewMeta is the part of a Pod's metadata the decision reads: not its managed fields, which
// the API server has set by admission and which list every field the pod sets.
type podViewMeta struct {
	Name         string            `json:"name"`
	GenerateName string            `json:"generateName"`
	Namespace    string            `json:"namespace"`
	UID          types.UID         `json:"uid"`
	Labels       map[string]string `json:"labels"` // carried to the shadow pod
	Annotations  map[string]string `json:"annotations"`
}

// decodePod decodes a pod request into a Pod holding the podView's fields, in one pass with
// JSON v2 (sigs.k8s.io/json's decoder reads a document twice, once to check it, once to
// decode). On what the API server sends, valid UTF-8 without duplicate names, both decode
// alike: names matched case-sensitively, fields the view lacks skipped
// (TestPodViewDecidesAsTheWholePod). v2 also refuses a duplicate name in what it skips, so the
// whole pod is held to what the API server sends.
func decodePod(req admission.Request) (*corev1.Pod, error) {
	if err := checkKind(req, podVersionKind); err != nil {
		return nil, err
	}
	if len(req.Object.Raw) == 0 {
		return nil, errNoObject
	}
	var v podView
	if err := jsonv2.Unmarshal(req.Object.Raw, &v); err != nil {
		if dup := duplicateField(err); dup != nil {
			return nil, fmt.Errorf("the request's object is not what the API server sends: %w", dup)
		}
		return nil, fmt.Errorf("the request's object is not a %s: %w", describe(podVersionKind), misplacedValue(err))
	}
	if err := checkObjectKind(&v, "object", podVersionKind); err != nil {
		return nil, err
	}
	m := &v.Metadata
	pod := &corev1.Pod{
		TypeMeta: v.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, GenerateName: m.GenerateName, Namespace: m.Namespace,
			UID: m.UID, Labels: m.Labels, Annotations: m.Annotations},
		Spec: corev1.PodSpec{NodeName: v.Spec.NodeName, NodeSelector: v.Spec.NodeSelector, Tolerations: v.Spec.Tolerations},
	}
	if a := v.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.Required != nil {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: a.NodeAffinity.Required}}
	}
	if len(v.Spec.Containers) > 0 {
		pod.Spec.Containers = make([]corev1.Container, len(v.Spec.Containers))
		for i, c := range v.Spec.Containers {
			pod.Spec.Containers[i] = corev1.Container{Name: c.Name, Ports: c.Ports}
		}
	}
	if len(v.Spec.InitContainers) > 0 {
		pod.Spec.InitContainers = make([]corev1.Container, len(v.Spec.InitContainers))
		for i, c := range v.Spec.InitContainers {
			pod.Spec.InitContainers[i] = corev1.Container{Name: c.Name, Ports: c.Ports, RestartPolicy: c.RestartPolicy}
		}
	}
	return pod, nil
}

// duplicateField is v2's refusal of a duplicate name as decodeObject words it for the other
// endpoints, by the path to the name joined with dots (array indices included), or nil for
// another error.
func duplicateField(err error) error {
	var serr *jsontext.SyntacticError
	if !errors.As(err, &serr) || serr.Err != jsontext.ErrDuplicateName {
		return nil
	}
	return fmt.Errorf("duplicate field %q", strings.Join(slices.Collect(serr.JSONPointer.Tokens()), "."))
}

// misplacedValue words v2's "this JSON value cannot go into this Go field" in shadowgate's
// terms: where, what was found and what belongs there. v2's own message names our Go types and
// deliberately switches its wording between processes ("cannot" or "unable to"), so neither a
// user nor a test could rely on it. Other errors pass unchanged.
func misplacedValue(err error) error {
	var serr *jsonv2.SemanticError
	if !errors.As(err, &serr) || serr.JSONKind == 0 || serr.GoType == nil {
		return err
	}
	return fmt.Errorf("%q holds a JSON %s where %s belongs", serr.JSONPointer, jsonKind(serr.JSONKind), goKind(serr.GoType.Kind()))
}

func jsonKind(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	}
	return "null"
}

func goKind(k reflect.Kind) string {
	switch k {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	}
	return "a number"
}
