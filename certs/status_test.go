package certs

import (
	"context"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Each state of the Certificate reads as what to look at next. Against a real API server and
// cert-manager, e2e/certmanager checks the message of a Certificate that cannot issue.
func TestCertificateStatus(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := cmapi.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: Namespace, Name: ServingCertificateName}
	crt := func(conds ...cmapi.CertificateCondition) *cmapi.Certificate {
		return &cmapi.Certificate{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec:       cmapi.CertificateSpec{SecretName: ServingSecretName},
			Status:     cmapi.CertificateStatus{Conditions: conds},
		}
	}
	const what = "cert-manager Certificate shadowgate-system/shadowgate-serving (Secret shadowgate-tls)"
	for _, c := range []struct {
		name string
		crt  *cmapi.Certificate
		want string
	}{
		{"missing", nil, "cert-manager Certificate shadowgate-system/shadowgate-serving does not exist"},
		{"not seen by cert-manager", crt(), what + " has no Ready condition yet; is cert-manager running?"},
		{"not ready", crt(
			cmapi.CertificateCondition{Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "DoesNotExist", Message: "other"},
			cmapi.CertificateCondition{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionFalse, Reason: "DoesNotExist", Message: "Issuing certificate as Secret does not exist"}),
			what + " is not Ready (DoesNotExist): Issuing certificate as Secret does not exist"},
		{"ready", crt(cmapi.CertificateCondition{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue, Reason: "Ready"}),
			what + " is Ready; the kubelet has not updated the mounted Secret yet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme)
			if c.crt != nil {
				b = b.WithObjects(c.crt)
			}
			if got := CertificateStatus(context.Background(), b.Build(), key); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}
