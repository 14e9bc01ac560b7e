// Package collector deletes what shadowgate created for shadows once no shadow uses it: a shadow
// namespace it created that holds no shadow object and whose pod namespace is gone, a
// credential copy it created that no shadow Deployment of its namespace mounts, and a scripts
// ConfigMap no shadow Deployment of its namespace mounts (an upgrade leaves the old scripts
// behind). The Reconciler collects shadows whose pod never came; this collects what they
// leave, so a made-up review, whose pod is never stored, leaves nothing behind. Of namespaces
// and copies only what carries inject.LabelCreatedByShadowgate is collected: a namespace an
// admin handed over, or a copy shadowgate adopted, is never deleted; of ConfigMaps named as
// scripts ConfigMaps only those labelled as one (inject.IsScriptsConfigMap). A scripts
// ConfigMap that shadows of its namespace mount but that is gone (deleted by hand) it applies
// again, so their pods can start. Copies are looked for only where identity says copies may be
// (holdsCopies): shadow namespaces, and pod namespaces with shadows beside their pods when the
// rules allow copies there; a namespace holding objects that merely carry shadowgate's labels
// is not looked in. Copies are looked for by name (shadowgate may not list Secrets): the
// policy's credentials, those shadows were seen using within copiesMemory, and the sources in
// the credentials namespace, so one the policy stopped naming goes too.
//
// It sweeps every period on the leader. Something is deleted only when two sweeps in a row
// found it unused: a shadow being applied (its namespace and copies first, its Deployment
// moments later) is never caught between the two. What is to go is read once more from the
// API server before it goes, and every delete is conditional on the UID the sweeps saw (and, for a
// copy, its resourceVersion), so an object recreated or changed meanwhile stays.
//
// It watches nothing: it lists, from the manager's cache, the namespaces (metadata) and shadow
// objects, the credential sources from the credentials namespace's cache, and reads scripts
// ConfigMaps and credential copies from the API server. It writes
// deletes of what it collects, and applies of scripts ConfigMaps gone missing. Its identity
// rule is internal/shadows': copies are looked for only where Identity.HoldsCopies says copies
// may be.
//
// It may import inject, validate, internal/applier, internal/metrics, internal/policystore,
// internal/shadows and controller-runtime.
package collector
