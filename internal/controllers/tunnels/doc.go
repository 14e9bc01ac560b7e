// Package tunnels is the tunnel reporter: it says on each offloaded pod how its tunnel is
// doing, from the shadow pod that carries it: an Event per change (TunnelWaitingForNode, TunnelReady, TunnelFailed with the
// reason and its remedy, TunnelRecovered, TunnelEnded) and the pod's Tunnel (api/v1alpha1) with the current
// state, kept once the pod finishes. The previous state is the Tunnel's, so a restart or a
// new leader records no Event twice. It writes the tunnel's fields of the Tunnel's status with
// a field manager of its own, and nothing of the pod: the virtual kubelet's status updates,
// which write back the pod as the VK stored it, never meet a write of shadowgate's.
//
// It watches offloaded pods and the shadow pods of their shadows, queued by offloaded pod, and
// reads the shadow's Deployment, Service and node ConfigMap from the manager's cache and the
// shadow pod's Events from the API server; of a shadow pod waiting for its compute node, only
// once its wait-reason sidecar's status says there can be a new one (waitEvents). Its identity rule is internal/shadows': it reads
// only the objects Identity.Objects gives for the pod, and only the shadow pods their
// Deployment's own ReplicaSets own (shadows.Pods); a look-alike elsewhere never reaches an
// Event or a Tunnel. A Tunnel is the pod's by its namespace, name and owner (Tunnel.IsFor).
//
// It may import api/v1alpha1, inject, validate, internal/applier, internal/eventnote, internal/metrics,
// internal/policystore, internal/printable, internal/shadows, internal/tunnelstate and
// controller-runtime.
package tunnels
