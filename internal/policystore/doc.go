// Package policystore gives every decision what it is taken by: the policy in force (PolicyStore,
// a watch of the one policy ConfigMap that keeps the last valid policy in force and says so when
// a new one is invalid or deleted) and the labels of the decided object's namespace
// (CachedNamespaces), which a virtual node's AllowedNamespaceSelector matches; Configs puts them
// together into a validate.Config. The admission handlers and the controllers read through it.
//
// It may import validate, internal/metrics, internal/eventnote and client-go.
package policystore
