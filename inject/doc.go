// Package inject turns an admitted pod and its virtual node's policy into what shadowgate
// writes, as typed Kubernetes objects, in the two phases the API server calls: Mutate (the
// relay address and the pre-exec snippet as annotations) and Admit (the check that the pod was
// mutated, and the shadow: namespace, node ConfigMap, Service, Deployment, credentials to
// copy, and the scripts ConfigMap the Deployment mounts); Render runs both as a CREATE does. The webhook, the reconciler, `shadowgate render`
// and the golden tests call exactly these. It owns the shadow's names and labels, and the
// embedded scripts and relay the shadow and the job run. Pure functions: nothing here touches
// the network.
//
// It may import Kubernetes API types and validate.
package inject
