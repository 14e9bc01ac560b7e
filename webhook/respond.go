package webhook

import (
	"errors"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/interlink-hq/shadowgate/validate"
)

// respond turns a decision into the admission response. A refusal is an Invalid status with
// one cause per field error, which kubectl prints as "<field>: Invalid value: ...: <detail>";
// warnings travel either way and kubectl prints them as "Warning:" lines.
func respond(gk schema.GroupKind, name string, d validate.Decision) admission.Response {
	if d.Allowed() {
		return admission.Allowed("").WithWarnings(d.Warnings...)
	}
	status := apierrors.NewInvalid(gk, name, d.Errors).ErrStatus
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed:  false,
		Result:   &status,
		Warnings: d.Warnings,
	}}
}

// refuseForShadow denies a pod whose shadow could not be applied, passing on the API server's
// code, reason and message: they say what stood in the way (a quota, a missing permission, a
// foreign Secret). The causes are dropped as they name the shadow's fields, not the pod's.
func refuseForShadow(err error, warnings []string) admission.Response {
	var status apierrors.APIStatus
	code, reason := int32(http.StatusInternalServerError), metav1.StatusReasonInternalError
	if errors.As(err, &status) {
		code, reason = status.Status().Code, status.Status().Reason
	}
	if reason == metav1.StatusReasonInvalid {
		// kubectl would print "The request is invalid" and hide the message that says which
		// shadow object was invalid; Forbidden keeps the message on screen. The code goes
		// with it: clients that read the code and not the reason would see 422 for a 403.
		code, reason = http.StatusForbidden, metav1.StatusReasonForbidden
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    code,
			Reason:  reason,
			Message: "the pod's shadow was not applied, so the pod is refused: " + err.Error(),
		},
		Warnings: warnings,
	}}
}

// objectName is the name kubectl shows for a refused object; a generateName object has none yet.
func objectName(meta metav1.Object) string {
	if meta.GetName() != "" {
		return meta.GetName()
	}
	return meta.GetGenerateName()
}
