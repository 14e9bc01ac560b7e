package certs

import (
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Names the cert-manager objects share with manifests/base: the webhook's namespace and
// Service (the name the API server verifies is <Service>.<Namespace>.svc) and the Secret the
// Deployment mounts as --cert-dir. A test holds them to the base.
const (
	Namespace         = "shadowgate-system"
	ServiceName       = "shadowgate"
	ServingSecretName = "shadowgate-tls"
)

// Names of the cert-manager objects. ServingCertificateName is what the webhook
// configurations' cert-manager.io/inject-ca-from names, and what serve waits for.
const (
	SelfSignedIssuerName   = "shadowgate-selfsigned"
	CACertificateName      = "shadowgate-ca"
	CASecretName           = "shadowgate-ca"
	CAIssuerName           = "shadowgate-ca"
	ServingCertificateName = "shadowgate-serving"
)

// Lifetimes. The serving certificate is short-lived and rotates with a new key (serve reloads
// it without restart); the CA outlives many of them, so the injected caBundle rarely changes.
const (
	caDuration         = 5 * 365 * 24 * time.Hour
	caRenewBefore      = 60 * 24 * time.Hour
	servingDuration    = 90 * 24 * time.Hour
	servingRenewBefore = 30 * 24 * time.Hour
	servingDNSName     = ServiceName + "." + Namespace + ".svc"
)

// InjectCAFrom is the value of cert-manager.io/inject-ca-from on both webhook configurations:
// cainjector copies the ca.crt of this Certificate's Secret into every caBundle.
const InjectCAFrom = Namespace + "/" + ServingCertificateName

// CertManagerObjects are the cert-manager objects that issue the webhook's serving certificate
// from a CA of its own: a self-signed Issuer signs the CA Certificate, a CA Issuer holding
// that CA signs the serving Certificate. A CA of its own, rather than a self-signed serving
// certificate, keeps the caBundle stable across serving-certificate renewals, so the API
// server trusts old and new certificates alike while serve switches over.
func CertManagerObjects() []runtime.Object {
	return []runtime.Object{
		issuer(SelfSignedIssuerName, cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}),
		certificate(CACertificateName, cmapi.CertificateSpec{
			IsCA:        true,
			CommonName:  "shadowgate webhook CA",
			SecretName:  CASecretName,
			Duration:    &metav1.Duration{Duration: caDuration},
			RenewBefore: &metav1.Duration{Duration: caRenewBefore},
			PrivateKey:  ecdsaKey(),
			IssuerRef:   cmmeta.IssuerReference{Name: SelfSignedIssuerName, Kind: cmapi.IssuerKind, Group: cmapi.SchemeGroupVersion.Group},
		}),
		issuer(CAIssuerName, cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: CASecretName}}),
		certificate(ServingCertificateName, cmapi.CertificateSpec{
			DNSNames:    []string{servingDNSName},
			SecretName:  ServingSecretName,
			Duration:    &metav1.Duration{Duration: servingDuration},
			RenewBefore: &metav1.Duration{Duration: servingRenewBefore},
			PrivateKey:  ecdsaKey(),
			Usages:      []cmapi.KeyUsage{cmapi.UsageServerAuth, cmapi.UsageDigitalSignature},
			IssuerRef:   cmmeta.IssuerReference{Name: CAIssuerName, Kind: cmapi.IssuerKind, Group: cmapi.SchemeGroupVersion.Group},
		}),
	}
}

func issuer(name string, cfg cmapi.IssuerConfig) *cmapi.Issuer {
	return &cmapi.Issuer{
		TypeMeta:   metav1.TypeMeta{APIVersion: cmapi.SchemeGroupVersion.String(), Kind: cmapi.IssuerKind},
		ObjectMeta: objectMeta(name),
		Spec:       cmapi.IssuerSpec{IssuerConfig: cfg},
	}
}

func certificate(name string, spec cmapi.CertificateSpec) *cmapi.Certificate {
	return &cmapi.Certificate{
		TypeMeta:   metav1.TypeMeta{APIVersion: cmapi.SchemeGroupVersion.String(), Kind: cmapi.CertificateKind},
		ObjectMeta: objectMeta(name),
		Spec:       spec,
	}
}

func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{"app.kubernetes.io/name": "shadowgate"}}
}

// ecdsaKey is a P-256 key, replaced on every issuance: a renewal is a real key rotation.
func ecdsaKey() *cmapi.CertificatePrivateKey {
	return &cmapi.CertificatePrivateKey{
		Algorithm:      cmapi.ECDSAKeyAlgorithm,
		Size:           256,
		RotationPolicy: cmapi.RotationPolicyAlways,
	}
}
