// Package tunnelstate owns what shadowgate says about an offloaded pod's tunnel once it is
// admitted: the reasons the shadow's scripts report (inject/scripts, as reason lines in
// termination messages and readiness probe output), the remedy shadowgate adds to each, the
// state derived from the shadow pod's own status and probe Events (Observe), and its fields in
// the pod's Tunnel (api/v1alpha1), which `shadowgate status` reads. It is pure: the webhook's tunnel reporter gathers what Observe
// reads and writes what it returns.
package tunnelstate
