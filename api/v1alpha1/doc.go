// Package v1alpha1 is shadowgate's own API, group shadowgate.interlink.eu: the Tunnel, which
// says how an offloaded pod's tunnel and shadow are doing. shadowgate alone writes Tunnels;
// the roles every namespace's users hold (view, edit, admin) read them and nothing more. It
// imports only Kubernetes' API machinery, so a client can import it alone.
//
// +kubebuilder:object:generate=true
// +groupName=shadowgate.interlink.eu
package v1alpha1
