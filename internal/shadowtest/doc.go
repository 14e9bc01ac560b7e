// Package shadowtest holds what the tests of the admission handlers, the applier, the identity
// rule and the controllers share: the example policy (manifests/examples/policy.yaml), a
// policy that never changes, an offloaded pod as the mutating webhook stores it and its shadow,
// fixed namespace labels, recorders of Events and applies, and a fake API client that holds
// Tunnels. Only tests import it.
//
// It may import api/v1alpha1, validate, inject, client-go and controller-runtime's client.
package shadowtest
