// Package reconciler keeps shadows and pods in step, keyed by pod. A shadow object whose pod is gone
// is deleted: at once when this process saw the pod deleted, else after the grace period,
// since /validate-pods applies a shadow before its pod is stored and a later admission step
// may still refuse the pod. A pod that has finished (phase Succeeded or Failed: a completed
// Job's pod) counts as gone, its shadow deleted at once and never re-applied: its job has
// left the compute node, and its shadow would hold SSH sessions to the login node for
// nothing. A shadow object deleted while its pod lives is re-applied.
//
// It also rolls shadows to the policy in force: when the policy renders a live pod's shadow
// differently it applies it again, at most --max-rolling-shadows at a time (rollPacer, the
// roller), and says how the shadow stands in the pod's Tunnel (its status.shadow, api/v1alpha1)
// and Events (ShadowRolled, ShadowRefusedByPolicy, ShadowRollStalled); and it starts a shadow
// admission held (applier.StartShadow) once its pod is stored. The roller is part of this
// package: it has no watch of its own, and paces only this reconciler's applies.
//
// It watches offloaded pods and the shadow objects (Deployments, Services, ConfigMaps,
// NetworkPolicies) of the manager's cache, indexed by the pod they claim, and is woken for
// every pod with a shadow when a new policy is put in force. It writes shadow objects (applies
// and deletes) and the shadow's state in pods' Tunnels, which it reads from the cache; never a
// pod. Its identity rule is
// internal/shadows': it reads, rolls and deletes only what Identity.Objects gives for the pod.
//
// It may import api/v1alpha1, inject, validate, internal/applier, internal/drift, internal/eventnote,
// internal/metrics, internal/policystore, internal/printable, internal/shadows,
// internal/tunnelstate and controller-runtime.
package reconciler
