// Package svcproxy gives the node's pods the Services that cluster DNS and kube-proxy would
// give them, on a machine where every pod shares the host's network: Hosts names each
// Service's ClusterIP in a pod's /etc/hosts the way cluster DNS answers for it, and Proxy keeps
// an nftables table that sends a connection to a ClusterIP and port to one of the Service's
// ready endpoints, as kube-proxy's nftables mode does. The API server refuses loopback
// addresses in EndpointSlices, so for pods whose IP is a loopback node address the proxy finds
// the endpoints among this node's pods itself.
package svcproxy
