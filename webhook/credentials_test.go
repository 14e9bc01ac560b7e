package webhook

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

func TestDecideCopy(t *testing.T) {
	const from = "shadowgate-system/hpc-ssh-key"
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hpc-ssh-key", Namespace: "shadowgate-system"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"id_ed25519": []byte("key")},
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
	for sentence, c := range map[string]struct {
		existing client.Object
		want     copyAction
		refused  bool
	}{
		"a missing copy is created":                                    {existing: nil, want: copyCreate},
		"shadowgate's copy with the source's content is left as it is": {existing: in(from, "key"), want: copyUpToDate},
		"shadowgate's copy with other content is overwritten":          {existing: in(from, "old key"), want: copyOverwrite},
		"a copy marked from another source is overwritten":             {existing: in("elsewhere/hpc-ssh-key", "key"), want: copyOverwrite},
		"an unmarked object with the same content is adopted":          {existing: in("", "key"), want: copyAdopt},
		"an unmarked object with other content is refused":             {existing: in("", "someone else's key"), refused: true},
	} {
		got, err := decideCopy(src, c.existing, from)
		if c.refused {
			const want = "refusing to overwrite secret user-shadow/hpc-ssh-key: it already exists, holds different content and was not created by shadowgate"
			if err == nil || err.Error() != want {
				t.Errorf("%s: error %v, want %q", sentence, err, want)
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
