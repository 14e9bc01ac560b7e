// Package sshtest runs real OpenSSH for tests, on loopback addresses (all of 127.0.0.0/8 is
// local on Linux, so a "login node" and "compute nodes" can each have an address of their own):
//
//	sshtest.Require(t, "socat")                    // fails the test naming a missing tool
//	login := sshtest.StartSSHD(t, "AllowTcpForwarding no") // sshd with a throwaway host and client key
//	node := sshtest.Loopback(t)                    // a fresh 127.x.y.z
//	port := sshtest.FreePort(t, node)
//	sshtest.StartHTTP(t, node, port, "node07")     // answers "hello from node07"
//
// Everything stops on test cleanup. sshd runs as the user running the tests (root in CI), who
// logs in with Server.ClientKey.
package sshtest
