package applier

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
)

// tunnelCreator is the field manager of a Tunnel's metadata, which it is created with.
const tunnelCreator = "shadowgate"

// ApplyTunnelStatus server-side applies status, the fields of a Tunnel's status that
// fieldManager owns, with status.podUID, on the Tunnel of pod: the object in the pod's
// namespace under its name, owned by the pod, so the garbage collector removes it with the pod.
// cached is the Tunnel the caller's cache holds, nil for none. A missing Tunnel is created; one
// that is not the pod's (an earlier pod's of the same name, not collected yet) is deleted and
// made again. The Tunnel's UID goes with the status as a precondition, so no other Tunnel is
// ever written; a Tunnel that went or was replaced meanwhile is no error (the pod's next
// reconcile writes again), and says so with written false.
func ApplyTunnelStatus(ctx context.Context, c client.Client, pod *corev1.Pod, cached *v1alpha1.Tunnel, fieldManager string, status v1alpha1.TunnelStatus) (written bool, err error) {
	uid, err := tunnelUID(ctx, c, pod, cached)
	if err != nil {
		return false, err
	}
	status.PodUID = pod.UID
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return false, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": fields}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Tunnel"))
	u.SetNamespace(pod.Namespace)
	u.SetName(pod.Name)
	u.SetUID(uid)
	err = c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("writing the status of Tunnel %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return true, nil
}

// tunnelUID is the UID of pod's Tunnel, made when there is none and made again when the one
// there is another pod's.
func tunnelUID(ctx context.Context, c client.Client, pod *corev1.Pod, cached *v1alpha1.Tunnel) (types.UID, error) {
	if cached != nil && cached.IsFor(pod) {
		return cached.UID, nil
	}
	if cached != nil {
		if err := deleteTunnel(ctx, c, cached); err != nil {
			return "", err
		}
	}
	t := &v1alpha1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}}}
	err := c.Create(ctx, t, client.FieldOwner(tunnelCreator))
	if err == nil {
		return t.UID, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating Tunnel %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	// Made since the cache was read: by another reconcile of this pod, or left by an
	// earlier pod the cache had not seen.
	live := &v1alpha1.Tunnel{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(t), live); err != nil {
		return "", err
	}
	if live.IsFor(pod) {
		return live.UID, nil
	}
	if err := deleteTunnel(ctx, c, live); err != nil {
		return "", err
	}
	return "", fmt.Errorf("Tunnel %s/%s was an earlier pod's: deleted, to be made again for pod UID %s", pod.Namespace, pod.Name, pod.UID)
}

// deleteTunnel deletes t, and no Tunnel made after it under its name.
func deleteTunnel(ctx context.Context, c client.Client, t *v1alpha1.Tunnel) error {
	err := c.Delete(ctx, t, client.Preconditions{UID: ptr.To(t.UID)})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting Tunnel %s/%s of an earlier pod: %w", t.Namespace, t.Name, err)
	}
	return nil
}
