// Package shadowtest holds what the tests of the admission handlers, the applier, the identity
// rule and the controllers share: the example policy (manifests/examples/policy.yaml), a
// policy that never changes, an offloaded pod as the mutating webhook stores it and its shadow,
// fixed namespace labels, and recorders of Events and applies. Only tests import it.
//
// It may import validate, inject and client-go.
package shadowtest
