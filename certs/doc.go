// Package certs provides the webhook's serving certificates: Serving reads them from files and
// picks up a renewal without a restart, reporting the cert-manager Certificate's Ready
// condition while it waits; ClientCA reloads the CA that authenticates the API server;
// SelfSigned is the bootstrap for `make dev` and the e2e suite, where no cert-manager runs (a
// throwaway CA and a serving certificate it signs); and the cert-manager objects of the
// kustomize overlay are generated from Go (genoverlay).
//
// It may import cert-manager's API types, controller-runtime and client-go; nothing of
// shadowgate's.
package certs
