package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// GroupVersion is the group and version of this package's kinds.
var GroupVersion = schema.GroupVersion{Group: "shadowgate.interlink.eu", Version: "v1alpha1"}

// AddToScheme adds this package's kinds to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Tunnel{}, &TunnelList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Tunnel is how an offloaded pod's tunnel and shadow are doing, as shadowgate last saw them.
// It has the pod's namespace and name, and the pod as its owner, so it goes with the pod;
// shadowgate writes its status and nothing else writes it. The virtual kubelet, which keeps
// the pod's status, never sees it. Every status write names the pod it is about
// (status.podUID), and the API server refuses one about another pod than spec.podUID.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="!has(self.status) || !has(self.status.podUID) || self.status.podUID == self.spec.podUID",message="status.podUID must be spec.podUID: a status about another pod is not this Tunnel's"
// +kubebuilder:resource:scope=Namespaced,shortName=tun,categories=shadowgate
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Compute-Node",type=string,JSONPath=`.status.computeNode`
// +kubebuilder:printcolumn:name="Wait-Reason",type=string,JSONPath=`.status.waitReason`,priority=1
// +kubebuilder:printcolumn:name="Expected-Start",type=string,JSONPath=`.status.expectedStart`,priority=1
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.status.service`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.urls[0]`
// +kubebuilder:printcolumn:name="Shadow",type=string,JSONPath=`.status.shadow.state`
// +kubebuilder:printcolumn:name="Since",type=date,JSONPath=`.status.since`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
type Tunnel struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TunnelSpec   `json:"spec"`
	Status TunnelStatus `json:"status,omitempty"`
}

// TunnelSpec names the pod a Tunnel reports on: set when shadowgate creates the Tunnel, never
// changed.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a Tunnel reports on one pod"
type TunnelSpec struct {
	// PodUID is the UID of the pod this Tunnel reports on, its owner.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	PodUID types.UID `json:"podUID"`
}

// IsFor says whether t is pod's Tunnel: it reports on pod's UID, and pod, by its name and UID,
// is its owner. Only shadowgate writes Tunnels, and it makes each for the pod it reports on.
func (t *Tunnel) IsFor(pod metav1.Object) bool {
	if t.Spec.PodUID != pod.GetUID() {
		return false
	}
	for _, ref := range t.OwnerReferences {
		if ref.APIVersion == "v1" && ref.Kind == "Pod" && ref.UID == pod.GetUID() && ref.Name == pod.GetName() {
			return true
		}
	}
	return false
}

// TunnelStatus is the tunnel's state, written by shadowgate's tunnel reporter, and the
// shadow's against the policy in force, written by its reconciler.
type TunnelStatus struct {
	// PodUID is the UID of the pod the status is about: spec.podUID, or the API server
	// refuses the write.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +optional
	PodUID types.UID `json:"podUID,omitempty"`
	// State is where the tunnel stands.
	// +kubebuilder:validation:Enum=Starting;WaitingForNode;Ready;Failed;Ended
	// +optional
	State string `json:"state,omitempty"`
	// Reason is why, one of the reasons of docs/tunnel-state.md.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says what the shadow saw, printable.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// Container is the shadow container the reason comes from.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Container string `json:"container,omitempty"`
	// ComputeNode is where the tunnel leads.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ComputeNode string `json:"computeNode,omitempty"`
	// WaitReason is why Slurm holds the queued job (squeue's %r: Priority, BeginTime,
	// Resources), while the state is WaitingForNode under NodeDiscovery slurm.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	WaitReason string `json:"waitReason,omitempty"`
	// ExpectedStart is when Slurm expects to start the queued job (squeue's %S, in UTC:
	// 2026-12-06T07:00:00Z), or N/A or Unknown when it has no estimate.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	ExpectedStart string `json:"expectedStart,omitempty"`
	// ForwardMode is the virtual node's SSH.ForwardMode: portforward or exec.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	ForwardMode string `json:"forwardMode,omitempty"`
	// Service is the shadow Service, <namespace>/<name>, that reaches the pod's ports.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	Service string `json:"service,omitempty"`
	// Ports are the pod's ports the tunnel forwards.
	// +listType=atomic
	// +optional
	Ports []int32 `json:"ports,omitempty"`
	// URLs are where the front door publishes ports outside the cluster, one per port it
	// publishes, in the order of Ports: every port of Ports, or only those the pod's
	// annotation interlink.eu/front-door-ports names, so there may be fewer URLs than Ports.
	// Each is https://<host>/, or http://<host>/ where the policy allows plain HTTP. Empty
	// without a front door.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=264
	// +optional
	URLs []string `json:"urls,omitempty"`
	// Since is when State, Reason and ComputeNode took their values.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Shadow is the shadow against the policy in force.
	// +optional
	Shadow *ShadowStatus `json:"shadow,omitempty"`
}

// ShadowStatus is a shadow against the policy in force.
type ShadowStatus struct {
	// State is Current, OutOfDate (waiting for its turn to roll), Rolling, or Refused (the
	// policy in force would refuse the pod).
	// +kubebuilder:validation:Enum=Current;OutOfDate;Rolling;Refused
	State string `json:"state"`
	// Reason says, for Refused, what the policy in force refuses.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`
	// Since is when State took its value.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// TunnelList is a list of Tunnels.
//
// +kubebuilder:object:root=true
type TunnelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tunnel `json:"items"`
}
