package webhook

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

// replicate copies one credential from the credentials namespace into the shadow's, marked
// with interlink.eu/replicated-from. An existing object is overwritten only when it carries
// the marker; an unmarked one with the same content is adopted (marked); any other is
// refused, as it belongs to someone else.
func (a *Applier) replicate(ctx context.Context, c inject.Credential, dryRun bool, created *createdObjects) error {
	if c.Namespace == a.credentialsNamespace {
		return nil // the shadow lives beside the source and mounts it as it is
	}
	src, err := newCredential(c.Kind)
	if err != nil {
		return err
	}
	if err := a.reader.Get(ctx, client.ObjectKey{Namespace: a.credentialsNamespace, Name: c.Name}, src); err != nil {
		if apierrors.IsNotFound(err) {
			return apierrors.NewNotFound(corev1.Resource(strings.ToLower(c.Kind)+"s"), fmt.Sprintf(
				"%s/%s (the policy names it for this virtual node and shadowgate copies it from its own namespace into the shadow's); ask the cluster admin to create it",
				a.credentialsNamespace, c.Name))
		}
		return fmt.Errorf("reading %s %s/%s: %w", c.Kind, a.credentialsNamespace, c.Name, err)
	}
	existing, _ := newCredential(c.Kind)
	from := a.credentialsNamespace + "/" + c.Name
	err = a.reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading %s %s/%s: %w", c.Kind, c.Namespace, c.Name, err)
	case existing.GetAnnotations()[validate.AnnotationReplicatedFrom] == from && sameContent(src, existing):
		// Every shadow in the namespace mounts the same copy: applying it again, for each
		// pod, would change nothing and cost the API server a server-side apply.
		return nil
	case existing.GetAnnotations()[validate.AnnotationReplicatedFrom] != "":
	case sameContent(src, existing):
	default:
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure,
			Code:   http.StatusConflict,
			Reason: metav1.StatusReasonConflict,
			Message: fmt.Sprintf("refusing to overwrite %s %s/%s: it already exists, holds different content and was not created by shadowgate",
				strings.ToLower(c.Kind), c.Namespace, c.Name),
		}}
	}
	_, err = a.applyObject(ctx, copyOf(src, c.Namespace, from), dryRun, created)
	return err
}

func newCredential(kind string) (client.Object, error) {
	switch kind {
	case "Secret":
		return &corev1.Secret{}, nil
	case "ConfigMap":
		return &corev1.ConfigMap{}, nil
	}
	return nil, fmt.Errorf("shadowgate cannot replicate a %s, only Secrets and ConfigMaps", kind)
}

// copyOf is the apply body of a copy of src in namespace: its content and the marker, nothing
// of the source's metadata.
func copyOf(src client.Object, namespace, from string) client.Object {
	meta := metav1.ObjectMeta{
		Name:        src.GetName(),
		Namespace:   namespace,
		Annotations: map[string]string{validate.AnnotationReplicatedFrom: from},
	}
	switch s := src.(type) {
	case *corev1.Secret:
		return &corev1.Secret{ObjectMeta: meta, Type: s.Type, Data: s.Data}
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: meta, Data: s.Data, BinaryData: s.BinaryData}
	}
	panic(fmt.Sprintf("copyOf: %T is not a credential", src)) // newCredential made src
}

// sameContent reports whether two credentials of the same kind hold the same content.
func sameContent(a, b client.Object) bool {
	switch x := a.(type) {
	case *corev1.Secret:
		y := b.(*corev1.Secret)
		return x.Type == y.Type && maps.EqualFunc(x.Data, y.Data, bytes.Equal)
	case *corev1.ConfigMap:
		y := b.(*corev1.ConfigMap)
		return maps.Equal(x.Data, y.Data) && maps.EqualFunc(x.BinaryData, y.BinaryData, bytes.Equal)
	}
	return false
}
