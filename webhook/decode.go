package webhook

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// objectOf decodes a request for a kind into a new *T, refusing a request for another kind.
func objectOf[T any, PT interface {
	*T
	runtime.Object
}](req admission.Request, kind schema.GroupVersionKind) (PT, error) {
	if err := checkKind(req, kind); err != nil {
		return nil, err
	}
	obj := PT(new(T))
	return obj, decodeObject(req, obj, kind)
}

// checkKind refuses a request for another kind than the endpoint's.
func checkKind(req admission.Request, kind schema.GroupVersionKind) error {
	if got := schema.GroupVersionKind(req.Kind); got != kind {
		return wrongKind(describe(kind), got)
	}
	return nil
}

// wrongKind is the refusal of a request for a kind the endpoint does not judge: only the
// webhook configuration's rules send it one.
func wrongKind(judges string, got schema.GroupVersionKind) error {
	return fmt.Errorf("this endpoint judges %s, but the request is for %s: "+
		"check the rules of the webhook configuration that sent it", judges, describe(got))
}

// decodeObject decodes a request's raw object, of the kind the request names, in one pass, as
// the API server's own JSON serializer decodes (case-sensitive, integers kept). The generic
// decoder would first read the whole document once more for its apiVersion and kind, which
// the endpoint's rules already fix and into's type already says. The API server never sends
// duplicate fields or an object of another kind than the request's; a request that does
// was not written by it, and is refused rather than judged by whichever duplicate came last.
func decodeObject(req admission.Request, into interface{ GetObjectKind() schema.ObjectKind }, kind schema.GroupVersionKind) error {
	if len(req.Object.Raw) == 0 {
		return errNoObject
	}
	return decodeRaw(req.Object.Raw, "object", into, kind)
}

// decodeOldObject decodes an UPDATE's oldObject, the object as stored, as decodeObject decodes
// the object: what is compared with it must be read by the same rules.
func decodeOldObject(req admission.Request, into interface{ GetObjectKind() schema.ObjectKind }, kind schema.GroupVersionKind) error {
	if len(req.OldObject.Raw) == 0 {
		return errNoOldObject
	}
	return decodeRaw(req.OldObject.Raw, "oldObject", into, kind)
}

// decodeRaw is decodeObject's decoding of raw, the request's field named what.
func decodeRaw(raw []byte, what string, into interface{ GetObjectKind() schema.ObjectKind }, kind schema.GroupVersionKind) error {
	strict, err := kjson.UnmarshalStrict(raw, into, kjson.DisallowDuplicateFields)
	if err != nil {
		return fmt.Errorf("the request's %s is not a %s: %w", what, describe(kind), err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("the request's %s is not what the API server sends: %w", what, errors.Join(strict...))
	}
	return checkObjectKind(into, what, kind)
}

// errNoObject refuses a request without an object: the webhook configurations' rules send only
// creates and updates, which carry one.
var errNoObject = errors.New("the admission request holds no object to decode")

// errNoOldObject refuses an UPDATE without the object as stored, which the API server always
// sends with one.
var errNoOldObject = errors.New("the UPDATE request holds no oldObject, the object as stored, to compare the object with")

// checkObjectKind refuses an object (the request's field named what) whose own apiVersion and
// kind are not the request's.
func checkObjectKind(obj interface{ GetObjectKind() schema.ObjectKind }, what string, kind schema.GroupVersionKind) error {
	if got := obj.GetObjectKind().GroupVersionKind(); !got.Empty() && got != kind {
		return fmt.Errorf("the request is for %s, but its %s says it is %s", describe(kind), what, describe(got))
	}
	return nil
}

// describe names a kind as a manifest states it, by kind and apiVersion.
func describe(gvk schema.GroupVersionKind) string {
	if gvk.Empty() {
		return "no kind"
	}
	if gvk.Group == "" {
		return fmt.Sprintf("%q (apiVersion %q)", gvk.Kind, gvk.Version)
	}
	return fmt.Sprintf("%q (apiVersion %q)", gvk.Kind, gvk.Group+"/"+gvk.Version)
}
