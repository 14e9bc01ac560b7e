package applier

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

// replicate copies one credential from the credentials namespace into the shadow's, marked
// with interlink.eu/replicated-from (decideCopy says when): CopyCredential, for an admission.
func (a *Applier) replicate(ctx context.Context, c inject.Credential, dryRun bool) error {
	_, err := a.CopyCredential(ctx, c, dryRun, true)
	return err
}

// CopyCredential brings the copy c of its source up to date and says what it did, or
// CopyRefused or CopyStuck with decideCopy's (or uncopyableType's) refusal; a missing copy is
// created only with create, else it is left missing and CopyMissing said. The copy is written
// without forced ownership and never blindly: a missing one is created, and an existing one
// updated at the resourceVersion the decision was made on, so an object created or changed in
// between makes the write fail and the decision is taken again on what is there now. The
// caller has made sure c is a place for a copy (shadows.Identity). The source is read
// through a.sources when set (CredentialSources: a cache of the credentials namespace), the
// copy always from the API server, as shadowgate caches no Secret outside its own namespace.
func (a *Applier) CopyCredential(ctx context.Context, c inject.Credential, dryRun, create bool) (CopyAction, error) {
	if c.Namespace == a.credentialsNamespace {
		return CopyUpToDate, nil // the shadow lives beside the source and mounts it as it is
	}
	src, err := NewCredential(c.Kind)
	if err != nil {
		return 0, err
	}
	var sources ObjectGetter = a.reader
	if a.sources != nil {
		sources = a.sources
	}
	if err := sources.Get(ctx, client.ObjectKey{Namespace: a.credentialsNamespace, Name: c.Name}, src); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, missingSource(c, a.credentialsNamespace)
		}
		return 0, fmt.Errorf("reading %s %s/%s: %w", c.Kind, a.credentialsNamespace, c.Name, err)
	}
	if err := uncopyableType(src, c); err != nil {
		return CopyStuck, err
	}
	from := a.credentialsNamespace + "/" + c.Name
	writes := a.writes(dryRun)
	// A lost race is taken again from the read, at most writeRounds times in all.
	for range writeRounds {
		existing, err := NewCredential(c.Kind)
		if err != nil {
			return 0, err
		}
		err = a.reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, existing)
		if apierrors.IsNotFound(err) {
			existing = nil
		} else if err != nil {
			return 0, fmt.Errorf("reading %s %s/%s: %w", c.Kind, c.Namespace, c.Name, err)
		}
		action, err := decideCopy(src, existing, from)
		switch {
		case err != nil:
			if existing.GetAnnotations()[validate.AnnotationReplicatedFrom] != "" {
				return CopyStuck, err
			}
			return CopyRefused, err
		case action == CopyUpToDate:
			return action, nil
		case action == CopyCreate && !create:
			return CopyMissing, nil
		case action == CopyCreate:
			cp := copyOf(src, c.Namespace, from)
			err = writes.Create(ctx, cp)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
		default: // CopyOverwrite, CopyAdopt
			err = writes.Update(ctx, overwrite(existing, src, from))
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue
			}
		}
		if err != nil {
			return 0, fmt.Errorf("copying %s %s into %s: %w", strings.ToLower(c.Kind), from, c.Namespace, err)
		}
		return action, nil
	}
	return 0, apierrors.NewConflict(schema.GroupResource{Resource: strings.ToLower(c.Kind) + "s"}, c.Namespace+"/"+c.Name,
		fmt.Errorf("it changed %d times while shadowgate was copying %s into it; try again", writeRounds, from))
}

// copyableSecretTypes are the types of Secret a key or keytab is kept in, and the front door's
// wildcard certificate (FrontDoor.TLSSecret), the only ones shadowgate copies; the
// least-privilege policy (manifests/base/least-privilege-policy.yaml) refuses its account a
// Secret of any other type, a service-account token above all.
var copyableSecretTypes = []corev1.SecretType{corev1.SecretTypeOpaque, corev1.SecretTypeSSHAuth, corev1.SecretTypeTLS}

// CopiedType says whether shadowgate copies a Secret of type t.
func CopiedType(t corev1.SecretType) bool { return slices.Contains(copyableSecretTypes, t) }

// uncopyableType refuses a source Secret (of credential c) of a type shadowgate does not copy,
// saying what to do; nil for one it copies, and for a ConfigMap.
func uncopyableType(src client.Object, c inject.Credential) error {
	s, ok := src.(*corev1.Secret)
	if !ok || CopiedType(s.Type) {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Kind: "secrets", Name: s.Name},
		Message: fmt.Sprintf("secret %s/%s is of type %q, and shadowgate copies only Secrets of type %s or %s, the types a key or keytab is kept in, or %s, a front door's certificate: "+
			"ask the cluster admin to create it again as one of those (%s)",
			s.Namespace, s.Name, s.Type, copyableSecretTypes[0], copyableSecretTypes[1], copyableSecretTypes[2], createCommand(c, s.Namespace)),
	}}
}

// missingSource is the NotFound error for a credential the policy names but the credentials
// namespace lacks, saying what it is for and who can fix it.
func missingSource(c inject.Credential, namespace string) error {
	resource := strings.ToLower(c.Kind) + "s"
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Details: &metav1.StatusDetails{Kind: resource, Name: c.Name},
		Message: fmt.Sprintf("%s %s/%s not found: the policy names it for this virtual node and shadowgate copies it from its own namespace into the shadow's; ask the cluster admin to create it (%s)",
			strings.ToLower(c.Kind), namespace, c.Name, createCommand(c, namespace)),
	}}
}

// createCommand is the kubectl command that creates credential c's source in namespace: a
// kubernetes.io/tls Secret for the front door's certificate, else a generic Secret or a
// ConfigMap from files.
func createCommand(c inject.Credential, namespace string) string {
	switch {
	case c.TLS:
		return fmt.Sprintf("kubectl create secret tls %s -n %s --cert=<certificate file> --key=<key file>", c.Name, namespace)
	case c.Kind == "Secret":
		return fmt.Sprintf("kubectl create secret generic %s -n %s --from-file=<key>=<file>", c.Name, namespace)
	}
	return fmt.Sprintf("kubectl create configmap %s -n %s --from-file=<key>=<file>", c.Name, namespace)
}

// CopyAction is what replicate does about the copy in the shadow's namespace.
type CopyAction int

const (
	CopyCreate    CopyAction = iota // there is none
	CopyUpToDate                    // shadowgate's copy of this source, same content: nothing to write
	CopyOverwrite                   // a copy shadowgate made (marked) with other content, or of another source
	CopyAdopt                       // unmarked but identical: marked and kept
	CopyRefused                     // unmarked, other content: someone else's, left alone
	CopyStuck                       // the API server would refuse the write: a marked copy that cannot change (cannotOverwrite), or a source of a type not copied (uncopyableType)
	CopyMissing                     // there is none, and CopyCredential was not asked to create one
)

// decideCopy decides, from the source and what the shadow's namespace holds (nil: nothing),
// what replicate does; an object someone else made with other content is refused with
// DESIGN.md's exact message, as it is theirs.
func decideCopy(src, existing client.Object, from string) (CopyAction, error) {
	if existing == nil {
		return CopyCreate, nil
	}
	marker := existing.GetAnnotations()[validate.AnnotationReplicatedFrom]
	same := SameContent(src, existing)
	switch {
	case marker == from && same:
		// Every shadow in the namespace mounts the same copy: writing it again, for each
		// pod, would change nothing and cost the API server a write.
		return CopyUpToDate, nil
	case marker != "":
		if err := cannotOverwrite(src, existing, marker, from, same); err != nil {
			return 0, err
		}
		return CopyOverwrite, nil
	case same:
		return CopyAdopt, nil
	}
	kind := strings.ToLower(CredentialKind(existing))
	return 0, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusConflict,
		Reason: metav1.StatusReasonConflict,
		Message: fmt.Sprintf("refusing to overwrite %s %s/%s: it already exists, holds different content and was not created by shadowgate",
			kind, existing.GetNamespace(), existing.GetName()),
	}}
}

// cannotOverwrite refuses to overwrite a copy (marked as a copy of marker) that the API server
// would not let change: a Secret whose source (from) now has another type, as a Secret's type
// is immutable, or a copy marked immutable (one adopted from an immutable object) whose content
// differs (same says it does not: then only its marker changes, which the API server allows).
// The update would fail with the API server's "field is immutable", which does not say what to
// do. Deleting the copy is the remedy, and the admin's to take: shadowgate deletes only copies
// no shadow mounts (Collector), and this one may be mounted. nil when the copy can be overwritten.
func cannotOverwrite(src, existing client.Object, marker, from string, same bool) error {
	kind := strings.ToLower(CredentialKind(existing))
	var why string
	if s, isSecret := src.(*corev1.Secret); isSecret {
		if e := existing.(*corev1.Secret); s.Type != e.Type {
			why = fmt.Sprintf("of type %s, and the source is now of type %s; a Secret's type cannot change", e.Type, s.Type)
			if marker != from {
				why = fmt.Sprintf("of type %s, and its source is now %s, of type %s; a Secret's type cannot change", e.Type, from, s.Type)
			}
		}
	}
	if why == "" && !same && immutable(existing) {
		why = "and is immutable, so it cannot take the source's new content"
	}
	if why == "" {
		return nil
	}
	ns, name := existing.GetNamespace(), existing.GetName()
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusConflict,
		Reason:  metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Kind: kind + "s", Name: name},
		Message: fmt.Sprintf("%s %s/%s is a copy of %s %s: delete the copy (kubectl delete %s -n %s %s) and shadowgate copies it again",
			kind, ns, name, marker, why, kind, ns, name),
	}}
}

// immutable says whether a credential is marked immutable: its content can no longer change.
func immutable(obj client.Object) bool {
	switch o := obj.(type) {
	case *corev1.Secret:
		return o.Immutable != nil && *o.Immutable
	case *corev1.ConfigMap:
		return o.Immutable != nil && *o.Immutable
	}
	return false
}

// overwrite is existing with src's content and the marker, at existing's resourceVersion; the
// rest of its metadata (an adopted object's labels, say) is kept.
func overwrite(existing, src client.Object, from string) client.Object {
	out := existing.DeepCopyObject().(client.Object)
	ann := maps.Clone(out.GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	ann[validate.AnnotationReplicatedFrom] = from
	out.SetAnnotations(ann)
	switch o := out.(type) {
	case *corev1.Secret:
		s := src.(*corev1.Secret)
		o.Type, o.Data, o.StringData = s.Type, s.Data, nil
	case *corev1.ConfigMap:
		s := src.(*corev1.ConfigMap)
		o.Data, o.BinaryData = s.Data, s.BinaryData
	}
	return out
}

// CredentialKind names a credential's kind; a typed object read by a client carries none.
func CredentialKind(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return "Secret"
	}
	return "ConfigMap"
}

func NewCredential(kind string) (client.Object, error) {
	switch kind {
	case "Secret":
		return &corev1.Secret{}, nil
	case "ConfigMap":
		return &corev1.ConfigMap{}, nil
	}
	return nil, fmt.Errorf("shadowgate cannot replicate a %s, only Secrets and ConfigMaps", kind)
}

// copyOf is the body of a new copy of src in namespace: its content, the marker and the label
// that lets the Collector delete it once no shadow mounts it; nothing of the source's metadata.
func copyOf(src client.Object, namespace, from string) client.Object {
	meta := metav1.ObjectMeta{
		Name:        src.GetName(),
		Namespace:   namespace,
		Labels:      withCreatedBy(nil),
		Annotations: map[string]string{validate.AnnotationReplicatedFrom: from},
	}
	switch s := src.(type) {
	case *corev1.Secret:
		return &corev1.Secret{ObjectMeta: meta, Type: s.Type, Data: s.Data}
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: meta, Data: s.Data, BinaryData: s.BinaryData}
	}
	panic(fmt.Sprintf("copyOf: %T is not a credential", src)) // NewCredential made src
}

// SameContent reports whether two credentials of the same kind hold the same content.
func SameContent(a, b client.Object) bool {
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
