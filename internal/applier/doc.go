// Package applier writes shadowgate's objects: it server-side applies a pod's shadow (its
// namespace, node ConfigMap, Service, NetworkPolicy, scripts ConfigMap and Deployment) and
// copies the credentials it mounts from the credentials namespace (CopyCredential, the one
// decision both admission and the credential follower take about a copy), through a client
// whose applies answer with metadata only (NewClient). It also writes an offloaded pod's Tunnel,
// the fields of its status each controller owns (ApplyTunnelStatus), and starts a shadow held at
// admission once its pod is stored (StartShadow, LabelAwaitingPod).
//
// It may import api/v1alpha1, inject, validate, internal/metrics and controller-runtime's client.
package applier
