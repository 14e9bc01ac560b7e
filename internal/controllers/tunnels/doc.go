// Package tunnels is the tunnel reporter: it says on each offloaded pod how its tunnel is
// doing, from the shadow pod that carries it: an Event per change (TunnelWaitingForNode, TunnelReady, TunnelFailed with the
// reason and its remedy, TunnelRecovered) and the interlink.eu/tunnel-state annotation with
// the current state. The previous state is the annotation itself, so a restart or a new
// leader records no Event twice. It writes that one annotation with a field manager of its
// own and nothing else of the pod: its status is the virtual kubelet's.
//
// It watches offloaded pods and the shadow pods of their shadows, queued by offloaded pod, and
// reads the shadow's Deployment, Service and node ConfigMap from the manager's cache and the
// shadow pod's Events from the API server. Its identity rule is internal/shadows': it reads
// only the objects Identity.Objects gives for the pod, and only the shadow pods their
// Deployment's own ReplicaSets own (shadows.Pods); a look-alike elsewhere never reaches an
// Event or the annotation.
//
// It may import inject, validate, internal/applier, internal/eventnote, internal/metrics,
// internal/policystore, internal/printable, internal/shadows, internal/tunnelstate and
// controller-runtime.
package tunnels
