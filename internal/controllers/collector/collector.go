package collector

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/applier"
	"github.com/interlink-hq/shadowgate/internal/metrics"
	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/internal/shadows"
	"github.com/interlink-hq/shadowgate/validate"
)

// Collector is the collector of the package doc.
type Collector struct {
	cache                client.Reader // the manager's: namespaces (metadata) and shadow objects
	reader               client.Reader // uncached
	identity             shadows.Identity
	writer               client.Client
	policies             policystore.Policies
	credentialsNamespace string        // where the sources are: never collected
	sources              client.Reader // the credentials namespace's Secrets and ConfigMaps; nil without replication
	period               time.Duration
	metrics              *metrics.Metrics

	// unused is what the last sweep found unused, with its UID and resourceVersion.
	unused map[collectKey]objectVersion
	// held remembers, for copiesMemory, the places for copies that last held shadow objects:
	// the copies a shadow mounted in a pod namespace (credentials in pod namespaces) are looked
	// for there after the shadow has gone.
	held map[string]time.Time
	// seen remembers, for copiesMemory, the credentials ("Secret/<name>") shadow objects were
	// last seen using: their copies are looked for after the policy stopped naming them.
	seen map[string]time.Time
}

// New is the collector of what shadows of credentialsNamespace's credentials leave, sweeping
// every period: cache is the manager's, reader uncached, writer deletes, sources the cache of
// credentialsNamespace's Secrets and ConfigMaps (nil without replication).
func New(cache, reader client.Reader, identity shadows.Identity, writer client.Client, policies policystore.Policies, credentialsNamespace string, sources client.Reader, period time.Duration, metrics *metrics.Metrics) *Collector {
	return &Collector{cache: cache, reader: reader, identity: identity, writer: writer, policies: policies, credentialsNamespace: credentialsNamespace,
		sources: sources, period: period, metrics: metrics, unused: map[collectKey]objectVersion{}, held: map[string]time.Time{}, seen: map[string]time.Time{}}
}

var (
	_ manager.Runnable               = (*Collector)(nil)
	_ manager.LeaderElectionRunnable = (*Collector)(nil)
)

// collectKey names one object the collector may delete; scripts marks a scripts ConfigMap.
type collectKey struct {
	kind, namespace, name string
	scripts               bool
}

func (k collectKey) String() string {
	if k.namespace == "" {
		return k.kind + " " + k.name
	}
	return k.kind + " " + k.namespace + "/" + k.name
}

type objectVersion struct {
	uid             types.UID
	resourceVersion string
}

const (
	// copiesMemory is how long a namespace's copies are looked for after its last shadow.
	copiesMemory = time.Hour
	// maxHeldNamespaces bounds held; past it the oldest are forgotten first.
	maxHeldNamespaces = 4096
	// maxSeenCredentials bounds seen; past it the oldest are forgotten first.
	maxSeenCredentials = 256
)

// NeedLeaderElection implements manager.LeaderElectionRunnable: one replica sweeps.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (c *Collector) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("collector")
	t := time.NewTicker(c.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := c.sweep(log.IntoContext(ctx, logger)); err != nil && ctx.Err() == nil {
				logger.Error(err, "sweep for unused shadow namespaces and credential copies")
			}
		}
	}
}

// sweep finds what is unused now and deletes what the last sweep found unused too.
func (c *Collector) sweep(ctx context.Context) error {
	now := time.Now()
	uses, err := c.shadowUses(ctx)
	if err != nil {
		return err
	}
	for ns := range uses {
		copies, err := c.identity.HoldsCopies(ctx, ns)
		if err != nil {
			return err
		}
		if copies {
			c.held[ns] = now
		}
	}
	forgetOldest(c.held, now.Add(-copiesMemory), maxHeldNamespaces)
	c.rememberUses(uses, now)
	namespaces := &metav1.PartialObjectMetadataList{TypeMeta: policystore.NamespaceMeta}
	if err := c.cache.List(ctx, namespaces, client.MatchingLabels{inject.LabelCreatedByShadowgate: "true"}, client.HasLabels{inject.LabelShadowNamespaceFor}); err != nil {
		return err
	}
	unused := map[collectKey]objectVersion{}
	lookIn := map[string]bool{}
	for i := range namespaces.Items {
		ns := &namespaces.Items[i]
		if ns.DeletionTimestamp != nil {
			continue
		}
		if podNS, err := c.identity.ShadowNamespaceFor(ctx, ns.Name); err != nil || podNS == "" {
			if err != nil {
				return err
			}
			continue // marked, but not at the name shadowgate derives for its pod namespace
		}
		if _, inUse := uses[ns.Name]; !inUse && now.Sub(ns.CreationTimestamp.Time) >= c.period {
			live, err := c.podNamespaceLives(ctx, c.cache, ns.Labels[inject.LabelShadowNamespaceFor])
			if err != nil {
				return err
			}
			if !live {
				unused[collectKey{kind: "Namespace", name: ns.Name}] = objectVersion{uid: ns.UID}
				continue // its copies and scripts go with it
			}
		}
		lookIn[ns.Name] = true
	}
	for ns := range c.held {
		lookIn[ns] = true
	}
	delete(lookIn, c.credentialsNamespace)
	copies, err := c.unusedCopies(ctx, lookIn, uses, now)
	if err != nil {
		return err
	}
	for k, v := range copies {
		unused[k] = v
	}
	scripts := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}}
	if err := c.reader.List(ctx, scripts, client.MatchingLabels{inject.LabelManagedBy: inject.ManagedBy, validate.LabelShadowRole: inject.ShadowRoleScripts}); err != nil {
		return err
	}
	for k, v := range unusedScripts(scripts.Items, uses, unused, now, c.period) {
		unused[k] = v
	}
	doomed := twiceUnused(c.unused, unused)
	c.unused = unused
	firstErr := c.restoreScripts(ctx, missingScripts(uses, scripts.Items))
	for _, k := range doomed {
		if err := c.collect(ctx, k, unused[k]); err != nil && firstErr == nil {
			firstErr = err
		}
		delete(c.unused, k)
	}
	return firstErr
}

// shadowMounts are, for each namespace holding cached shadow objects (and only those), the
// credentials its shadow Deployments mount and its shadow Ingresses name ("Secret/<name>",
// "ConfigMap/<name>").
type shadowMounts map[string]map[string]bool

// shadowUses reads the cache's shadow objects, by namespace.
func (c *Collector) shadowUses(ctx context.Context) (shadowMounts, error) {
	objs, err := shadows.ListKinds(ctx, c.cache, c.identity.GatewayAPI, client.MatchingLabelsSelector{Selector: shadows.Selector})
	if err != nil {
		return nil, err
	}
	uses := shadowMounts{}
	for _, obj := range objs {
		mounts := uses[obj.GetNamespace()]
		if mounts == nil {
			mounts = map[string]bool{}
			uses[obj.GetNamespace()] = mounts
		}
		for _, m := range shadows.UsedCredentials(obj) {
			mounts[m] = true
		}
	}
	return uses, nil
}

// rememberUses keeps in seen the credentials uses names, seen at now.
func (c *Collector) rememberUses(uses shadowMounts, now time.Time) {
	for _, mounts := range uses {
		for m := range mounts {
			c.seen[m] = now
		}
	}
	forgetOldest(c.seen, now.Add(-copiesMemory), maxSeenCredentials)
}

// unusedCopies reads, in each namespace of lookIn, the copies under copyNames that no cached
// shadow object uses, and keeps those shadowgate created (createdCopy), a period ago or more.
// There is no list of Secrets: shadowgate may not list them, so each is one metadata read, a
// namespace's few credential names at most.
func (c *Collector) unusedCopies(ctx context.Context, lookIn map[string]bool, uses shadowMounts, now time.Time) (map[collectKey]objectVersion, error) {
	names, err := c.copyNames(ctx)
	if err != nil {
		return nil, err
	}
	out := map[collectKey]objectVersion{}
	for ns := range lookIn {
		for kn := range names {
			if uses[ns][kn] {
				continue
			}
			kind, name, _ := strings.Cut(kn, "/")
			obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
			err := c.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return nil, fmt.Errorf("reading %s %s/%s: %w", kind, ns, name, err)
			}
			if createdCopy(obj) && obj.DeletionTimestamp == nil && now.Sub(obj.CreationTimestamp.Time) >= c.period {
				out[collectKey{kind: kind, namespace: ns, name: name}] = objectVersion{uid: obj.UID, resourceVersion: obj.ResourceVersion}
			}
		}
	}
	return out, nil
}

// copyNames are the names ("Secret/<name>", "ConfigMap/<name>") a copy may have: those of the
// credentials the policy names, of those shadows were seen using within copiesMemory, and of
// the sources in the credentials namespace (of Secrets, those of a type shadowgate copies), so
// a copy is found after the policy stopped naming it (a front door turned off, a TLSSecret
// renamed), across a restart too while its source is kept. Whether an object of such a name is
// a copy to collect is its marks' to say, read only where copies may be.
func (c *Collector) copyNames(ctx context.Context) (map[string]bool, error) {
	names := map[string]bool{}
	if pol := c.policies.Current(); pol != nil {
		for _, node := range pol.VirtualNodes {
			for _, cred := range inject.Credentials(&node.Network, "") {
				names[cred.Kind+"/"+cred.Name] = true
			}
		}
	}
	for m := range c.seen {
		names[m] = true
	}
	if c.sources == nil {
		return names, nil
	}
	secrets, configMaps := &corev1.SecretList{}, &corev1.ConfigMapList{}
	for _, list := range []client.ObjectList{secrets, configMaps} {
		if err := c.sources.List(ctx, list, client.InNamespace(c.credentialsNamespace)); err != nil {
			return nil, fmt.Errorf("listing the credential sources in %s: %w", c.credentialsNamespace, err)
		}
	}
	for i := range secrets.Items {
		if applier.CopiedType(secrets.Items[i].Type) {
			names["Secret/"+secrets.Items[i].Name] = true
		}
	}
	for i := range configMaps.Items {
		names["ConfigMap/"+configMaps.Items[i].Name] = true
	}
	return names, nil
}

// unusedScripts are the scripts ConfigMaps of items (read from the API server) that no cached
// shadow Deployment of their namespace mounts, made a period before now or earlier, outside
// the namespaces unused already holds (they go with their namespace).
func unusedScripts(items []metav1.PartialObjectMetadata, uses shadowMounts, unused map[collectKey]objectVersion, now time.Time, period time.Duration) map[collectKey]objectVersion {
	out := map[collectKey]objectVersion{}
	for i := range items {
		cm := &items[i]
		if _, nsGoes := unused[collectKey{kind: "Namespace", name: cm.Namespace}]; nsGoes || !inject.IsScriptsConfigMap(cm) ||
			uses[cm.Namespace]["ConfigMap/"+cm.Name] || cm.DeletionTimestamp != nil || now.Sub(cm.CreationTimestamp.Time) < period {
			continue
		}
		out[collectKey{kind: "ConfigMap", namespace: cm.Namespace, name: cm.Name, scripts: true}] = objectVersion{uid: cm.UID, resourceVersion: cm.ResourceVersion}
	}
	return out
}

// missingScripts are the namespaces whose cached shadow Deployments mount this shadowgate's
// scripts ConfigMap while items (all scripts ConfigMaps, read from the API server) has none
// there: deleted by hand, the shadows' pods could not start again. An earlier shadowgate's
// scripts, mounted by a shadow it rendered, cannot be made again here: that content is gone.
func missingScripts(uses shadowMounts, items []metav1.PartialObjectMetadata) []string {
	current := inject.ScriptsConfigMap("").Name
	present := map[string]bool{}
	for i := range items {
		if items[i].Name == current && items[i].DeletionTimestamp == nil {
			present[items[i].Namespace] = true
		}
	}
	var out []string
	for ns, mounts := range uses {
		if mounts["ConfigMap/"+current] && !present[ns] {
			out = append(out, ns)
		}
	}
	return out
}

// restoreScripts applies the scripts ConfigMap again in each of namespaces, returning the
// first error after trying them all.
func (c *Collector) restoreScripts(ctx context.Context, namespaces []string) error {
	var firstErr error
	for _, ns := range namespaces {
		u, err := applier.ToApply(inject.ScriptsConfigMap(ns), c.writer.Scheme())
		if err == nil {
			err = client.WithFieldOwner(c.writer, applier.FieldManager).Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership)
		}
		if applier.IsMissingNamespace(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			continue // its shadows go with it
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("applying the scripts ConfigMap of %s again: %w", ns, err)
			}
			continue
		}
		log.FromContext(ctx).Info("applied again the scripts ConfigMap shadows mount, which was gone", "namespace", ns, "name", u.GetName())
	}
	return firstErr
}

// createdCopy says whether obj is a credential copy shadowgate created (not adopted).
func createdCopy(obj metav1.Object) bool {
	_, replicated := obj.GetAnnotations()[validate.AnnotationReplicatedFrom]
	return replicated && obj.GetLabels()[inject.LabelCreatedByShadowgate] == "true"
}

// twiceUnused are the keys unused now that the last sweep found unused too, as the same object.
func twiceUnused(last, now map[collectKey]objectVersion) []collectKey {
	var out []collectKey
	for k, v := range now {
		if prev, ok := last[k]; ok && prev == v {
			out = append(out, k)
		}
	}
	return out
}

// collect deletes one unused object, if it is still the one the sweeps saw; a namespace only
// after the API server, not the cache, says it holds no shadow object.
func (c *Collector) collect(ctx context.Context, k collectKey, v objectVersion) error {
	var obj client.Object
	pre := metav1.Preconditions{UID: &v.uid}
	switch k.kind {
	case "Namespace":
		if unused, err := c.namespaceUnused(ctx, k.name); err != nil || !unused {
			return err
		}
		obj = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.name}}
	default:
		if unused, err := c.copyUnused(ctx, k); err != nil || !unused {
			return err
		}
		if k.kind == "Secret" {
			obj = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: k.name}}
		} else {
			obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: k.name}}
		}
		pre.ResourceVersion = &v.resourceVersion
	}
	err := c.writer.Delete(ctx, obj, &client.DeleteOptions{Preconditions: &pre})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil // gone already, or no longer the object found unused
	case err != nil:
		return fmt.Errorf("deleting %s: %w", k, err)
	}
	c.metrics.Collected.WithLabelValues(k.kind).Inc()
	what := "deleted a credential copy shadowgate created that no shadow mounts"
	switch {
	case k.kind == "Namespace":
		what = "deleted a shadow namespace shadowgate created that holds no shadow"
	case k.scripts:
		what = "deleted a scripts ConfigMap no shadow mounts"
	}
	log.FromContext(ctx).Info(what, "object", k.String())
	return nil
}

// podNamespaceLives says whether the pod namespace ns exists and is not being deleted, as r
// has it: a shadow namespace is kept while its pod namespace lives, as its next pod would
// otherwise meet it being deleted.
func (c *Collector) podNamespaceLives(ctx context.Context, r client.Reader, ns string) (bool, error) {
	obj := &metav1.PartialObjectMetadata{TypeMeta: policystore.NamespaceMeta}
	err := r.Get(ctx, types.NamespacedName{Name: ns}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return obj.DeletionTimestamp == nil, nil
}

// namespaceUnused asks the API server, not the cache, whether the shadow namespace ns holds
// no shadow object and its pod namespace is gone.
func (c *Collector) namespaceUnused(ctx context.Context, ns string) (bool, error) {
	obj := &metav1.PartialObjectMetadata{TypeMeta: policystore.NamespaceMeta}
	if err := c.reader.Get(ctx, types.NamespacedName{Name: ns}, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if live, err := c.podNamespaceLives(ctx, c.reader, obj.Labels[inject.LabelShadowNamespaceFor]); err != nil || live {
		return false, err
	}
	objs, err := shadows.ListKinds(ctx, c.reader, c.identity.GatewayAPI, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: shadows.Selector}, client.Limit(1))
	return err == nil && len(objs) == 0, err
}

// copyUnused asks the API server, not the cache, whether no shadow Deployment of the copy's
// (or scripts ConfigMap's) namespace mounts it and no shadow Ingress there names it.
func (c *Collector) copyUnused(ctx context.Context, k collectKey) (bool, error) {
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &networkingv1.IngressList{}} {
		if err := c.reader.List(ctx, list, client.InNamespace(k.namespace), client.MatchingLabels{inject.LabelManagedBy: inject.ManagedBy}); err != nil {
			return false, err
		}
		used := false
		err := apimeta.EachListItem(list, func(o runtime.Object) error {
			used = used || slices.Contains(shadows.UsedCredentials(o.(client.Object)), k.kind+"/"+k.name)
			return nil
		})
		if err != nil || used {
			return false, err
		}
	}
	return true, nil
}

// forgetOldest drops from seen what was last seen before cutoff and then, past max entries,
// the oldest.
func forgetOldest(seen map[string]time.Time, cutoff time.Time, max int) {
	for k, t := range seen {
		if t.Before(cutoff) {
			delete(seen, k)
		}
	}
	for len(seen) > max {
		var oldest string
		for k, t := range seen {
			if oldest == "" || t.Before(seen[oldest]) {
				oldest = k
			}
		}
		delete(seen, oldest)
	}
}
