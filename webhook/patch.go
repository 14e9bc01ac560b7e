package webhook

import (
	"encoding/json"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// annotationsPatch admits with the patch that takes a pod's annotations from before to after,
// computed by PatchResponseFromRaw from the annotations alone. inject.Mutate changes
// annotations and nothing else, so this is the whole difference, found at a cost in proportion
// to the annotations rather than to the pod, and fields this version of the Pod type does not
// know pass through as the API server sent them. TestAnnotationPatchIsTheFullDiff holds it to
// the full diff.
func annotationsPatch(before, after map[string]string) admission.Response {
	original, err := json.Marshal(annotationsDocument(before))
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	current, err := json.Marshal(annotationsDocument(after))
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(original, current)
}

// annotationsDocument is the part of a pod the patch is computed on. No annotations are left
// out rather than written as null, so the first ones are added whether the API server sent no
// member, null or {}.
func annotationsDocument(annotations map[string]string) map[string]any {
	meta := map[string]any{}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	return map[string]any{"metadata": meta}
}
