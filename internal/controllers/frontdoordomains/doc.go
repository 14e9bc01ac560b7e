// Package frontdoordomains reserves the front door's domains for shadowgate. It keeps one
// ConfigMap in shadowgate's namespace (--front-door-domains-configmap) holding, as its keys,
// the domains of the policy's WildcardDNS, each with the virtual nodes that publish under it.
// That ConfigMap is the parameter of the shipped ValidatingAdmissionPolicy
// shadowgate-front-door-hosts, by which the API server refuses an Ingress or HTTPRoute host
// under one of those domains from anyone but shadowgate and the cluster admins: a tenant who
// could publish a host there would take a pod's URL, and cert-manager would issue it a
// certificate for it (docs/security.md "The front door's hosts").
//
// It runs on the leader. It writes when the policy in force changes and when the ConfigMap
// differs from the policy (an edit or a delete is undone), watching that one ConfigMap by
// name; a write that fails is retried with a backoff. It writes nothing when the ConfigMap
// already says what the policy says.
//
// It may import validate/policy, internal/policystore and client-go.
package frontdoordomains
