package applier

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

func TestDecideCopy(t *testing.T) {
	const from = "shadowgate-system/hpc-ssh-key"
	source := func(typ corev1.SecretType) client.Object {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "hpc-ssh-key", Namespace: "shadowgate-system"},
			Type:       typ,
			Data:       map[string][]byte{"id_ed25519": []byte("key")},
		}
	}
	in := func(marker, key string) client.Object {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "hpc-ssh-key", Namespace: "user-shadow"},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"id_ed25519": []byte(key)},
		}
		if marker != "" {
			s.Annotations = map[string]string{validate.AnnotationReplicatedFrom: marker}
		}
		return s
	}
	immutable := func(o client.Object) client.Object {
		o.(*corev1.Secret).Immutable = ptr.To(true)
		return o
	}
	const (
		frozen = "secret user-shadow/hpc-ssh-key is a copy of shadowgate-system/hpc-ssh-key and is immutable, so it cannot take the source's new content: " +
			"delete the copy (kubectl delete secret -n user-shadow hpc-ssh-key) and shadowgate copies it again"
		foreign     = "refusing to overwrite secret user-shadow/hpc-ssh-key: it already exists, holds different content and was not created by shadowgate"
		typeChanged = "secret user-shadow/hpc-ssh-key is a copy of shadowgate-system/hpc-ssh-key of type Opaque, and the source is now of type kubernetes.io/ssh-auth; " +
			"a Secret's type cannot change: delete the copy (kubectl delete secret -n user-shadow hpc-ssh-key) and shadowgate copies it again"
		typeAndSourceChanged = "secret user-shadow/hpc-ssh-key is a copy of elsewhere/hpc-ssh-key of type Opaque, and its source is now shadowgate-system/hpc-ssh-key, of type kubernetes.io/ssh-auth; " +
			"a Secret's type cannot change: delete the copy (kubectl delete secret -n user-shadow hpc-ssh-key) and shadowgate copies it again"
	)
	for sentence, c := range map[string]struct {
		srcType  corev1.SecretType // Opaque unless set
		existing client.Object
		want     CopyAction
		refused  string // the refusal's message, if refused
	}{
		"a missing copy is created":                                    {existing: nil, want: CopyCreate},
		"shadowgate's copy with the source's content is left as it is": {existing: in(from, "key"), want: CopyUpToDate},
		"shadowgate's copy with other content is overwritten":          {existing: in(from, "old key"), want: CopyOverwrite},
		"a copy marked from another source is overwritten":             {existing: in("elsewhere/hpc-ssh-key", "key"), want: CopyOverwrite},
		"an unmarked object with the same content is adopted":          {existing: in("", "key"), want: CopyAdopt},
		"an unmarked object with other content is refused":             {existing: in("", "someone else's key"), refused: foreign},
		"shadowgate's copy of a source recreated with another type is refused, saying to delete the copy": {
			srcType: corev1.SecretTypeSSHAuth, existing: in(from, "key"), refused: typeChanged},
		"shadowgate's copy with other content and of another type is refused, saying to delete the copy": {
			srcType: corev1.SecretTypeSSHAuth, existing: in(from, "old key"), refused: typeChanged},
		"a copy marked from another source and of another type is refused, naming both sources": {
			srcType: corev1.SecretTypeSSHAuth, existing: in("elsewhere/hpc-ssh-key", "key"), refused: typeAndSourceChanged},
		"an immutable copy with the source's content is left as it is":  {existing: immutable(in(from, "key")), want: CopyUpToDate},
		"an immutable unmarked object with the same content is adopted": {existing: immutable(in("", "key")), want: CopyAdopt},
		"an immutable copy marked from another source, with the same content, is overwritten": {
			existing: immutable(in("elsewhere/hpc-ssh-key", "key")), want: CopyOverwrite},
		"an immutable copy with other content is refused, saying to delete the copy": {
			existing: immutable(in(from, "old key")), refused: frozen},
		"an unmarked object of another type is refused as someone else's": {
			srcType: corev1.SecretTypeSSHAuth, existing: in("", "key"), refused: foreign},
	} {
		typ := corev1.SecretTypeOpaque
		if c.srcType != "" {
			typ = c.srcType
		}
		got, err := decideCopy(source(typ), c.existing, from)
		if c.refused != "" {
			if err == nil || err.Error() != c.refused {
				t.Errorf("%s: error %v, want %q", sentence, err, c.refused)
			}
			if !apierrors.IsConflict(err) {
				t.Errorf("%s: not a Conflict: %v", sentence, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %v, %v; want %v", sentence, got, err, c.want)
		}
	}
}

// A credential the policy names but the credentials namespace lacks is a NotFound status
// naming the object, with a message that says what it is for.
func TestMissingSourceIsAProperNotFound(t *testing.T) {
	err := missingSource(inject.Credential{Kind: "Secret", Name: "hpc-ssh-key", Namespace: "user-shadow"}, "shadowgate-system")
	if !apierrors.IsNotFound(err) {
		t.Fatalf("not a NotFound: %v", err)
	}
	d := err.(apierrors.APIStatus).Status().Details
	if d == nil || d.Name != "hpc-ssh-key" || d.Kind != "secrets" {
		t.Errorf("details %+v, want the Secret's name", d)
	}
	if !strings.HasPrefix(err.Error(), "secret shadowgate-system/hpc-ssh-key not found: ") {
		t.Errorf("message %q", err.Error())
	}
}

// A missing or uncopyable source is to be created again with the kubectl command for what it
// is: the front door's certificate a kubernetes.io/tls Secret, a key or keytab a generic one.
func TestTheRemedyCreatesTheRightKindOfSource(t *testing.T) {
	token := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shadowgate-system", Name: name}, Type: corev1.SecretTypeServiceAccountToken}
	}
	for sentence, c := range map[string]struct {
		cred inject.Credential
		src  *corev1.Secret
		want string
	}{
		"The front door's certificate, missing, is created as a TLS Secret.": {
			cred: inject.Credential{Kind: "Secret", Name: "apps-wildcard-tls", Namespace: "user-shadow", TLS: true},
			want: "kubectl create secret tls apps-wildcard-tls -n shadowgate-system --cert=<certificate file> --key=<key file>",
		},
		"The front door's certificate, of another type, is created again as a TLS Secret.": {
			cred: inject.Credential{Kind: "Secret", Name: "apps-wildcard-tls", Namespace: "user-shadow", TLS: true}, src: token("apps-wildcard-tls"),
			want: "kubectl create secret tls apps-wildcard-tls -n shadowgate-system --cert=<certificate file> --key=<key file>",
		},
		"The site's key, missing, is created as a generic Secret.": {
			cred: inject.Credential{Kind: "Secret", Name: "hpc-ssh-key", Namespace: "user-shadow"},
			want: "kubectl create secret generic hpc-ssh-key -n shadowgate-system --from-file=<key>=<file>",
		},
		"The known hosts, missing, are created as a ConfigMap.": {
			cred: inject.Credential{Kind: "ConfigMap", Name: "hpc-known-hosts", Namespace: "user-shadow"},
			want: "kubectl create configmap hpc-known-hosts -n shadowgate-system --from-file=<key>=<file>",
		},
	} {
		t.Run(sentence, func(t *testing.T) {
			b := fake.NewClientBuilder()
			if c.src != nil {
				b = b.WithObjects(c.src)
			}
			api := b.Build()
			a := &Applier{client: api, reader: api, credentialsNamespace: "shadowgate-system"}
			_, err := a.CopyCredential(t.Context(), c.cred, false, true)
			if err == nil || !strings.Contains(err.Error(), "("+c.want+")") {
				t.Errorf("error %v, want one saying (%s)", err, c.want)
			}
		})
	}
}

// A source Secret of a type no key, keytab or front-door certificate is kept in is not copied: the copy is refused,
// naming the Secret, its type and what to do, before anything is read in the shadow's namespace.
func TestASourceOfAnotherTypeIsNotCopied(t *testing.T) {
	for _, typ := range []corev1.SecretType{corev1.SecretTypeServiceAccountToken, corev1.SecretTypeBasicAuth, corev1.SecretTypeDockerConfigJson} {
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shadowgate-system", Name: "hpc-ssh-key"}, Type: typ}
		api := fake.NewClientBuilder().WithObjects(src).Build()
		a := &Applier{client: api, reader: api, credentialsNamespace: "shadowgate-system"}
		action, err := a.CopyCredential(context.Background(), inject.Credential{Kind: "Secret", Name: "hpc-ssh-key", Namespace: "user-shadow"}, false, true)
		want := `secret shadowgate-system/hpc-ssh-key is of type "` + string(typ) + `", and shadowgate copies only Secrets of type Opaque or kubernetes.io/ssh-auth`
		if action != CopyStuck || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "kubectl create secret generic hpc-ssh-key -n shadowgate-system") {
			t.Errorf("%s: %v, %v; want CopyStuck and a Forbidden saying %q and the remedy", typ, action, err, want)
		}
		if err := api.Get(context.Background(), client.ObjectKey{Namespace: "user-shadow", Name: "hpc-ssh-key"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a copy was written: %v", typ, err)
		}
	}
	for _, typ := range copyableSecretTypes {
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shadowgate-system", Name: "hpc-ssh-key"}, Type: typ}
		api := fake.NewClientBuilder().WithObjects(src).Build()
		a := &Applier{client: api, reader: api, credentialsNamespace: "shadowgate-system"}
		if action, err := a.CopyCredential(context.Background(), inject.Credential{Kind: "Secret", Name: "hpc-ssh-key", Namespace: "user-shadow"}, false, true); err != nil || action != CopyCreate {
			t.Errorf("%s: %v, %v; want it copied", typ, action, err)
		}
	}
}
