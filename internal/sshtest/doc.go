// Package sshtest runs real OpenSSH for tests, on loopback addresses (all of 127.0.0.0/8 is
// local on Linux, so each "login node" can have an address of its own) and, for compute nodes,
// which must not be the login node's loopback, on addresses of NodeRange, which the network
// namespace of EnterNodeNetwork makes local the same way:
//
//	sshtest.Require(t, "socat")                    // fails the test naming a missing tool
//	login := sshtest.StartSSHD(t, "AllowTcpForwarding no") // sshd with a throwaway host and client key
//	node := sshtest.NodeAddress(t)                 // a fresh compute node address
//	port := sshtest.FreePort(t, node)
//	sshtest.StartHTTP(t, node, port, "node07")     // answers "hello from node07"
//
// Everything stops on test cleanup. sshd runs as the user running the tests (root in CI), who
// logs in with Server.ClientKey.
package sshtest
