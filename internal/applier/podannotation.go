package applier

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyPodAnnotation server-side applies the one annotation key a field manager of shadowgate
// owns on an offloaded pod, or removes it for an empty value, and nothing else of the pod. The
// pod's UID goes with it, so a pod deleted and created again under the same name in between
// is not written; such a pod, or one gone, is no error (its own reconcile follows), and says
// so with written false.
func ApplyPodAnnotation(ctx context.Context, writer client.Client, pod *corev1.Pod, fieldManager, key, value string) (written bool, err error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	u.SetNamespace(pod.Namespace)
	u.SetName(pod.Name)
	u.SetUID(pod.UID)
	if value != "" {
		u.SetAnnotations(map[string]string{key: value})
	}
	err = writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	return err == nil, err
}
