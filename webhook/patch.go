package webhook

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/inject"
)

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

var jsonPatchType = admissionv1.PatchTypeJSONPatch

// annotationPatch is the JSON patch that takes a pod's annotations from before to after. It
// is written from the two maps rather than by diffing the re-encoded pod against the one the
// API server sent: inject.MutatePod changes annotations and nothing else, and a diff of two
// whole documents costs in proportion to the pod (thousands of allocations for one with many
// containers, Istio's injector once spent seconds there) while this costs in proportion to
// what changed. Only the annotations are touched, so fields this version of the Pod type does
// not know pass through as sent. TestAnnotationPatchIsTheFullDiff holds it to the full diff.
// It returns nil when nothing changed.
func annotationPatch(before, after map[string]string) []patchOp {
	if len(before) == 0 {
		if len(after) == 0 {
			return nil
		}
		// The API server may send no annotations member, a null or an empty one; add sets it
		// whichever it is.
		return []patchOp{{Op: "add", Path: "/metadata/annotations", Value: after}}
	}
	var ops []patchOp
	for _, key := range slices.Sorted(maps.Keys(before)) {
		if _, kept := after[key]; !kept {
			ops = append(ops, patchOp{Op: "remove", Path: annotationPointer(key)})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(after)) {
		if v, had := before[key]; !had || v != after[key] {
			// add replaces a member that exists, so one op serves both cases.
			ops = append(ops, patchOp{Op: "add", Path: annotationPointer(key), Value: after[key]})
		}
	}
	return ops
}

// pointerEscaper escapes a JSON pointer's reference token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func annotationPointer(key string) string {
	return "/metadata/annotations/" + pointerEscaper.Replace(key)
}

// patchResponse admits with a patch, encoded here once: admission.Response.Patches would be
// encoded, then read back by encoding/json, once more.
func patchResponse(ops []patchOp, warnings []string) admission.Response {
	patch, err := encodePatch(ops)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed:   true,
		Patch:     patch,
		PatchType: &jsonPatchType,
		Warnings:  warnings,
	}}
}

// snippetStartJSON is inject.SnippetStart() JSON-encoded, without its closing quote.
var snippetStartJSON = func() []byte {
	b, _ := json.Marshal(inject.SnippetStart()) // a string always encodes
	return b[:len(b)-1]
}()

// encodePatch is json.Marshal(ops), byte for byte, except that a value starting with the
// snippet takes its constant start already encoded: escaping those 18 KB again for each pod
// was a fifth of the time of admitting one that asks for the reverse tunnel (pprof). JSON
// escapes each character on its own, so the two encoded pieces join as the whole would.
func encodePatch(ops []patchOp) ([]byte, error) {
	start := inject.SnippetStart()
	size := 2
	for _, op := range ops {
		size += len(op.Path) + 32
		if v, isString := op.Value.(string); isString {
			size += len(v) + len(v)/16 // room for some escapes
		}
	}
	out := append(make([]byte, 0, size), '[')
	for i, op := range ops {
		if i > 0 {
			out = append(out, ',')
		}
		v, isString := op.Value.(string)
		if !isString || !strings.HasPrefix(v, start) {
			b, err := json.Marshal(op)
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
			continue
		}
		head, err := json.Marshal(patchOp{Op: op.Op, Path: op.Path})
		if err != nil {
			return nil, err
		}
		rest, err := json.Marshal(v[len(start):])
		if err != nil {
			return nil, err
		}
		out = append(out, head[:len(head)-1]...) // without its closing brace
		out = append(out, `,"value":`...)
		out = append(out, snippetStartJSON...)
		out = append(out, rest[1:]...) // without its opening quote
		out = append(out, '}')
	}
	return append(out, ']'), nil
}
