// Package webhook is `shadowgate serve` less its HTTP plumbing (internal/serving): the
// admission handlers, which decode a request, call validate or inject's phases and respond;
// the policy store (a watch of the policy ConfigMap); the server-side applier of shadows and
// credentials; the Events on pods; and the reconciler that keeps shadows and pods in step.
// Every decision is taken by validate and inject, the same functions the CLI calls; this
// package adds only what needs the API server.
//
// It may import validate, inject, internal/serving, controller-runtime and client-go.
package webhook
