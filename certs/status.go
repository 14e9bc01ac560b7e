package certs

import (
	"context"
	"fmt"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CertificateFlag is serve's flag naming the cert-manager Certificate, in serve's namespace,
// that writes the Secret mounted as --cert-dir. The cert-manager overlay sets it.
const CertificateFlag = "cert-manager-certificate"

// CertificateStatus says, for a serve waiting on its certificate files, where the Certificate
// that issues them stands: missing, not yet seen by cert-manager, not Ready with the message of
// its Ready condition, or Ready while the kubelet has not yet updated the mounted Secret. r
// needs cert-manager's types in its scheme and get on certificates.cert-manager.io.
func CertificateStatus(ctx context.Context, r client.Reader, key types.NamespacedName) string {
	var crt cmapi.Certificate
	if err := r.Get(ctx, key, &crt); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("cert-manager Certificate %s does not exist", key)
		}
		return fmt.Sprintf("reading cert-manager Certificate %s: %v", key, err)
	}
	what := fmt.Sprintf("cert-manager Certificate %s (Secret %s)", key, crt.Spec.SecretName)
	for _, c := range crt.Status.Conditions {
		if c.Type != cmapi.CertificateConditionReady {
			continue
		}
		if c.Status == cmmeta.ConditionTrue {
			return what + " is Ready; the kubelet has not updated the mounted Secret yet"
		}
		return fmt.Sprintf("%s is not Ready (%s): %s", what, c.Reason, c.Message)
	}
	return what + " has no Ready condition yet; is cert-manager running?"
}
