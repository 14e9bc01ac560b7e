// Package svcproxy gives the node's pods the Services that cluster DNS and kube-proxy would
// give them, on a machine where every pod shares the host's network. A Service's ClusterIP
// a.b.c.d in the API server's service range 10.0.0.0/16 stands for the loopback address
// 127.100.c.d (see Loopback): the proxy listens there on each TCP service port and carries
// each connection to a ready endpoint of the Service's EndpointSlices; the hosts file (see
// Hosts) names those addresses the way cluster DNS names the ClusterIPs. The API server
// refuses loopback addresses in EndpointSlices, so for pods whose IP is a loopback node
// address the proxy finds the endpoints among this node's pods itself.
package svcproxy
