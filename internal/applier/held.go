package applier

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LabelAwaitingPod marks a shadow Deployment applied at admission with no replicas: its pod is
// not stored yet, so nothing logs in to the site for it. The Reconciler starts it, removing the
// label, once it sees the pod stored; a pod refused after the webhooks never is, and its shadow
// is deleted after the grace period without having run. A label, not an annotation: the
// deployment controller copies a Deployment's annotations onto its ReplicaSets, and an
// interlink.eu/ annotation there would send them to the webhooks.
const LabelAwaitingPod = "interlink.eu/shadow-awaiting-pod"

// StartShadow gives d, the shadow Deployment of a stored pod, the replicas of want, the
// shadow the policy in force renders for the pod, if it is still held as admission applied
// it (LabelAwaitingPod); a shadow scaled down by hand is not. The patch is conditional on the
// resourceVersion read, so a Deployment changed meanwhile is looked at again.
func StartShadow(ctx context.Context, c client.Client, d, want *appsv1.Deployment) error {
	if _, held := d.Labels[LabelAwaitingPod]; !held {
		return nil
	}
	started := d.DeepCopy()
	started.Spec.Replicas = want.Spec.Replicas
	delete(started.Labels, LabelAwaitingPod)
	err := c.Patch(ctx, started, client.MergeFromWithOptions(d, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("starting the shadow Deployment %s/%s of a stored pod: %w", d.Namespace, d.Name, err)
	}
	return nil
}
