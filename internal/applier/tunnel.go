package applier

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
)

// tunnelCreator is the field manager of a Tunnel's metadata, which it is created with.
const tunnelCreator = "shadowgate"

// CachedTunnel is pod's Tunnel as c, the manager's cache, holds it; nil when there is none. One
// that is not the pod's (an earlier pod's of the same name, not collected yet) comes with its
// status cleared: it says nothing about pod, and ApplyTunnelStatus replaces it.
func CachedTunnel(ctx context.Context, c client.Reader, pod *corev1.Pod) (*v1alpha1.Tunnel, error) {
	tunnel := &v1alpha1.Tunnel{}
	err := c.Get(ctx, client.ObjectKeyFromObject(pod), tunnel)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !tunnel.IsFor(pod):
		tunnel.Status = v1alpha1.TunnelStatus{}
	}
	return tunnel, nil
}

// ApplyTunnelStatus server-side applies status, the fields of a Tunnel's status that
// fieldManager owns, with status.podUID, on the Tunnel of pod: the object in the pod's
// namespace under its name, made for the pod's UID (spec.podUID) and owned by the pod, so the
// garbage collector removes it with the pod. cached is the Tunnel the caller's cache holds, nil
// for none. A missing Tunnel is created; one that is not the pod's (an earlier pod's of the
// same name, not collected yet) is deleted and made again. The API server refuses a status
// whose podUID is not the Tunnel's spec.podUID (the CRD's rule), so a write about a pod never
// lands in another pod's Tunnel, however stale the caller's view: such a write, or one to a
// Tunnel gone meanwhile, is no error (the pod's next reconcile writes again), and says so with
// written false.
func ApplyTunnelStatus(ctx context.Context, c client.Client, pod *corev1.Pod, cached *v1alpha1.Tunnel, fieldManager string, status v1alpha1.TunnelStatus) (written bool, err error) {
	if err := ensureTunnel(ctx, c, pod, cached); err != nil {
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
	err = c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsInvalid(err):
		log.FromContext(ctx).Info("the API server refused a Tunnel's status: it is another pod's now; the pod's next reconcile writes its own",
			"tunnel", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "error", err.Error())
		return false, nil
	case err != nil:
		return false, fmt.Errorf("writing the status of Tunnel %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return true, nil
}

// ensureTunnel makes pod's Tunnel when cached says there is none, or the one there is another
// pod's.
func ensureTunnel(ctx context.Context, c client.Client, pod *corev1.Pod, cached *v1alpha1.Tunnel) error {
	if cached != nil && cached.IsFor(pod) {
		return nil
	}
	if cached != nil {
		if err := deleteTunnel(ctx, c, cached); err != nil {
			return err
		}
	}
	err := createTunnel(ctx, c, pod)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Made since the cache was read: by the other controller, or left by an earlier pod the
	// cache had not seen, which is deleted and made again once.
	live := &v1alpha1.Tunnel{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if live.IsFor(pod) {
		return nil
	}
	if err := deleteTunnel(ctx, c, live); err != nil {
		return err
	}
	return client.IgnoreAlreadyExists(createTunnel(ctx, c, pod))
}

// createTunnel creates pod's Tunnel, with no status.
func createTunnel(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	t := &v1alpha1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}},
		Spec: v1alpha1.TunnelSpec{PodUID: pod.UID},
	}
	err := c.Create(ctx, t, client.FieldOwner(tunnelCreator))
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Tunnel %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return err
}

// deleteTunnel deletes t, and no Tunnel made after it under its name.
func deleteTunnel(ctx context.Context, c client.Client, t *v1alpha1.Tunnel) error {
	err := c.Delete(ctx, t, client.Preconditions{UID: ptr.To(t.UID)})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting Tunnel %s/%s of an earlier pod: %w", t.Namespace, t.Name, err)
	}
	return nil
}
