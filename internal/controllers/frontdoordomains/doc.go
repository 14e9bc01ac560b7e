// Package frontdoordomains reserves the front door's domains for shadowgate. It keeps one
// ConfigMap in shadowgate's namespace (--front-door-domains-configmap) holding, as its keys,
// the domains of the policy's WildcardDNS, each with the virtual nodes that publish under it,
// and the domains under which shadowgate's Ingresses and HTTPRoutes in shadow namespaces still
// have hosts, valued Rolling: after WildcardDNS changes or the front door is turned off, a
// shadow keeps its hosts until its roll's turn, and its domain stays reserved until then.
// That ConfigMap is the parameter of the shipped ValidatingAdmissionPolicy
// shadowgate-front-door-hosts, by which the API server refuses an Ingress or HTTPRoute host
// under one of those domains from anyone but shadowgate and the cluster admins: a tenant who
// could publish a host there would take a pod's URL, and cert-manager would issue it a
// certificate for it (docs/security.md "The front door's hosts").
//
// It runs on the leader. It writes when the policy in force changes, when shadowgate's
// Ingresses or HTTPRoutes in the manager's cache change, and when the ConfigMap differs from
// what it reserves (an edit or a delete is undone), watching that one ConfigMap by name; it
// patches the data to exactly the reserved domains at the version it read, and a write that
// fails is retried with a backoff. It writes nothing when the ConfigMap already says them.
//
// It may import validate, validate/policy, internal/policystore, client-go and
// controller-runtime's cache and client.
package frontdoordomains
