// Package webhook is the admission handlers of `shadowgate serve`, less their HTTP plumbing
// (internal/serving): each decodes a request, calls validate or inject's phases and responds;
// /validate-pods applies the admitted pod's shadow (internal/applier) behind the bound on
// shadows of pods not stored yet, and records the pod's Events once it is stored. Every
// decision is taken by validate and inject, the same functions the CLI calls; this package
// adds only what needs the API server. The controllers that keep shadows in step after
// admission are in controllers/.
//
// It may import validate, inject, internal/serving, internal/applier, internal/policystore,
// internal/metrics, internal/shadows, controller-runtime and client-go.
package webhook
