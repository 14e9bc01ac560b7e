package main

import (
	"context"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/certs"
)

// servingCertificate is the certificate of the webhook server, from --cert-dir. With
// --cert-manager-certificate, the reason serve gives for not being ready while the files are
// missing includes that Certificate's Ready condition, read with a client of its own: the
// manager's scheme and cache stay free of cert-manager's types, which only this read needs.
func (o *serveOptions) servingCertificate(cfg *rest.Config, namespace string, log logr.Logger) (*certs.Serving, error) {
	if o.certificate == "" {
		return certs.NewServing(o.certDir, nil, log), nil
	}
	scheme := runtime.NewScheme()
	if err := cmapi.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: namespace, Name: o.certificate}
	return certs.NewServing(o.certDir, func(ctx context.Context) string {
		return certs.CertificateStatus(ctx, c, key)
	}, log), nil
}
