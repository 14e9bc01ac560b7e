// Package eventnote fits a note to what events.k8s.io accepts: at most Max bytes, cut at a
// rune boundary. Every Event shadowgate records on a pod, a policy ConfigMap or a credential
// source goes through it.
//
// It imports the standard library only.
package eventnote
