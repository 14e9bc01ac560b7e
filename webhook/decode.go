package webhook

import (
	"errors"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// objectOf decodes a request's raw object into a new *T.
func objectOf[T any, PT interface {
	*T
	runtime.Object
}](raw runtime.RawExtension) (PT, error) {
	obj := PT(new(T))
	return obj, decodeObject(raw, obj)
}

// decodeObject decodes a request's raw object in one pass, as the API server's own JSON
// serializer decodes (case-sensitive, integers kept). The generic decoder would first read the
// whole document once more for its apiVersion and kind, which the endpoint's rules already fix
// and into's type already says.
func decodeObject(raw runtime.RawExtension, into runtime.Object) error {
	if len(raw.Raw) == 0 {
		return errors.New("the admission request holds no object to decode")
	}
	return kjson.UnmarshalCaseSensitivePreserveInts(raw.Raw, into)
}

// badRequest counts an error decision at endpoint and answers 400 with err, for a request
// whose object cannot be decoded (or, at /validate-workloads, whose kind is not in the scheme).
func (m *Metrics) badRequest(endpoint string, err error) admission.Response {
	m.decided(endpoint, resultError)
	return admission.Errored(http.StatusBadRequest, err)
}
