// Package follower keeps the credential copies shadowgate makes equal to their sources: a
// change of a Secret or ConfigMap in the credentials namespace that the policy replicates
// queues a check of its copy in every namespace whose shadow Deployments mount it, and so
// does a new shadow Deployment for the copies it mounts (a copy written at admission from a
// source read a moment before its change, or while the leader was away, is caught there).
// Each check is applier.CopyCredential, the admission's own decision: a copy that differs is
// updated, marker kept; one that cannot follow is left alone and said so, with a Warning
// Event on the source, a log line naming the copy and the remedy, and a metric. It runs on
// the leader; the queue keeps one entry per copy however often it is asked for. A copy is
// queued, read and written only where identity says a copy may be (mayHoldCopy): a Deployment
// anywhere else that mounts a Secret of the source's name is no shadow, whatever its labels.
//
// It watches the Secrets and ConfigMaps of the credentials namespace (a cache of that
// namespace alone: applier.CredentialSources) and the shadow Deployments of the manager's
// cache, indexed by what they mount. It writes credential copies (applier.CopyCredential) and
// Warning Events CopyNotFollowing on sources. Its identity rule is internal/shadows':
// Identity.MayHoldCopy before anything is read or written.
//
// It may import inject, validate, internal/applier, internal/eventnote, internal/metrics,
// internal/policystore, internal/shadows and controller-runtime.
package follower
