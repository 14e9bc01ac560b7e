package inject

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
)

// mutatingWebhookHint says what to check when a pod reaches validation without the mutating phase's work.
// Its last clause is the case no configuration fixes: the API server calls back, after a later
// mutating webhook, only the webhooks it called before, and /mutate-pods is called only for
// pods with an interlink.eu/ or pre-exec annotation or the virtual node's toleration.
const mutatingWebhookHint = "shadowgate's mutating webhook (/mutate-pods) did not run for this pod, or failed open: " +
	"check that the MutatingWebhookConfiguration shadowgate exists, selects this pod and has failurePolicy: Fail, " +
	"read its admission warnings, and recreate the pod; if another mutating webhook adds the interlink.eu/reverse-* " +
	"annotations, write an interlink.eu/ annotation or the virtual-node.interlink/no-schedule toleration in the pod " +
	"itself, since the API server does not call back a webhook that it skipped before"

// checkMutated refuses a pod that validate.Pod admitted but that the mutating phase (prepare) has not prepared, as
// when the mutating webhook was skipped or failed open: a pod that asks for the reverse tunnel
// must have its bind address recorded and exactly one snippet block, calling the snippet with
// that address, in its pre-exec; a pod that asks for none must have no block. Otherwise its job
// would run without the tunnel, or wait for one that nobody builds. o is validate.Pod's.
func checkMutated(pod *corev1.Pod, o *validate.Offload) field.ErrorList {
	if o == nil {
		return nil
	}
	ann := validate.PodPaths.Meta.Child("annotations")
	preExecPath := ann.Key(validate.AnnotationPreExec)
	preExec := pod.Annotations[validate.AnnotationPreExec]
	blocks := snippetBlocks(preExec)
	if !o.WantsReverse() {
		if len(blocks) > 0 {
			return field.ErrorList{field.Forbidden(preExecPath,
				"holds shadowgate's reverse-tunnel snippet, but the pod asks for no reverse tunnel; "+mutatingWebhookHint)}
		}
		return nil
	}
	if !o.Bind.IsValid() {
		return field.ErrorList{field.Required(ann.Key(validate.AnnotationReverseBind),
			"the pod asks for the reverse tunnel, but no relay address is recorded; "+mutatingWebhookHint)}
	}
	// The pre-exec, relay and all, is too long to repeat in a message: these name no value.
	if len(blocks) == 0 {
		return field.ErrorList{field.Required(preExecPath,
			"the pod asks for the reverse tunnel, but its pre-exec lacks shadowgate's snippet, so the job would run without it; "+mutatingWebhookHint)}
	}
	if len(blocks) > 1 {
		return field.ErrorList{field.Forbidden(preExecPath, fmt.Sprintf(
			"holds %d blocks of shadowgate's reverse-tunnel snippet, want exactly 1; %s", len(blocks), mutatingWebhookHint))}
	}
	block := preExec[blocks[0][0]:blocks[0][1]]
	if !strings.Contains(block, "\n"+snippetCall+" '"+o.Bind.String()+"' ") {
		return field.ErrorList{field.Forbidden(preExecPath, fmt.Sprintf(
			"shadowgate's reverse-tunnel snippet does not set up the tunnel on the recorded %s %s; %s",
			validate.AnnotationReverseBind, o.Bind, mutatingWebhookHint))}
	}
	return nil
}
