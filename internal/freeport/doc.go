// Package freeport chooses TCP ports for tests that must tell another program which port to
// listen on (sshd, slurmd, etcd, kube-apiserver, shadowgate serve). A listener of the test's
// own process should bind port 0 instead: only a port chosen in advance can be lost to a race.
package freeport
