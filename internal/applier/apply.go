package applier

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"golang.org/x/sync/errgroup"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/metrics"
)

// FieldManager owns every field shadowgate applies.
const FieldManager = "shadowgate"

// cleanupTimeout bounds the removal of a failed request's objects. It runs in the background
// on its own clock, after the denial has been sent: the request's time may be what ran out,
// and a denial the API server no longer waits for is a failurePolicy error, not a message.
const cleanupTimeout = 10 * time.Second

// ShadowApplier applies a pod's shadow before the pod is stored: the Applier when serving.
type ShadowApplier interface {
	Apply(ctx context.Context, s *inject.Shadow, dryRun bool) (warnings []string, err error)
}

// Applier server-side applies shadows and copies the credentials they mount.
type Applier struct {
	client client.Client // writes, through a transport that records statuses (NewClient); see writes
	reader client.Reader // uncached reads: credential contents and copies, existing node ConfigMaps
	scheme *runtime.Scheme
	// credentialsNamespace is where the policy's Secrets and ConfigMaps are copied from.
	credentialsNamespace string
	metrics              *metrics.Metrics
	// sources reads the credentials to copy (CredentialSources); nil reads them with reader.
	sources    ObjectGetter
	namespaces knownNamespaces
	// scripts remembers, as "<namespace>/<name>", the scripts ConfigMaps applied lately.
	scripts knownNamespaces
	// cleanups tracks removals still running after their request was answered, so that
	// shutdown waits for them (Wait).
	cleanups sync.WaitGroup
}

// New is the Applier writing through writer (NewClient) and reading with reader, which is
// uncached, the credentials of credentialsNamespace through sources (nil: with reader).
func New(writer client.Client, reader client.Reader, scheme *runtime.Scheme, credentialsNamespace string, metrics *metrics.Metrics, sources *CredentialSources) *Applier {
	a := &Applier{client: writer, reader: reader, scheme: scheme, credentialsNamespace: credentialsNamespace, metrics: metrics}
	if sources != nil {
		a.sources = sources
	}
	return a
}

// Apply applies a shadow: its namespace first (unless applied lately: knownNamespaces), then
// the node ConfigMap, Service, front door (Ingress or HTTPRoutes), NetworkPolicy, credentials
// and scripts ConfigMap together, then the Deployment, which mounts them, so its pods never
// start before what they mount exists nor unfenced. A nil NodeConfigMap, Service, Ingress,
// NetworkPolicy, Deployment or Scripts (or no HTTPRoutes) is left alone
// (the reconciler applies only what is missing). On an error the objects this call created are
// removed in the background, once the caller has its answer, but not the namespace, the
// credential copies nor the scripts ConfigMap: every shadow of the pod's namespace shares them,
// and concurrent admissions may rely on them; the Collector deletes them once unused. A dry run
// applies with dry-run and persists nothing.
func (a *Applier) Apply(ctx context.Context, s *inject.Shadow, dryRun bool) ([]string, error) {
	start := time.Now()
	created := &createdObjects{}
	warnings, err := a.apply(ctx, s, dryRun, created)
	outcome := "ok"
	if err != nil {
		outcome = "error"
		a.cleanups.Go(func() { a.remove(ctx, created) })
	}
	a.metrics.ApplySeconds.WithLabelValues(outcome, strconv.FormatBool(dryRun)).Observe(time.Since(start).Seconds())
	return warnings, err
}

func (a *Applier) apply(ctx context.Context, s *inject.Shadow, dryRun bool, created *createdObjects) ([]string, error) {
	known := s.Namespace != nil && a.namespaces.known(s.Namespace.Name)
	warnings, err := a.applyObjects(ctx, s, dryRun, created, known)
	if known && (IsMissingNamespace(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)) {
		// The namespace was deleted since it was applied: nothing went into it, so all is
		// applied again, the namespace first (which says so while it is still going).
		a.namespaces.forget(s.Namespace.Name)
		if s.Scripts != nil {
			a.scripts.forget(scriptsKey(s.Scripts))
		}
		return a.applyObjects(ctx, s, dryRun, created, false)
	}
	return warnings, err
}

// applyObjects is apply's one attempt; namespaceKnown skips the namespace, applied lately.
func (a *Applier) applyObjects(ctx context.Context, s *inject.Shadow, dryRun bool, created *createdObjects, namespaceKnown bool) ([]string, error) {
	if s.Namespace != nil && !namespaceKnown {
		existed, err := a.ensureNamespace(ctx, s.Namespace, dryRun, created)
		if err != nil {
			return nil, err
		}
		if existed || !dryRun {
			a.namespaces.add(s.Namespace.Name)
		}
		if dryRun && !existed {
			// Objects cannot be dry-run into a namespace that does not exist.
			return []string{fmt.Sprintf("dry run: the shadow's namespace %s does not exist yet, so only its creation was checked, not the objects that go into it", s.Namespace.Name)}, nil
		}
	}
	// The first failure does not cancel the others: an apply cut short on the client may
	// still have created its object on the server, and then nobody would know to remove it.
	var g errgroup.Group
	if s.NodeConfigMap != nil {
		g.Go(func() error { return a.createNodeConfigMap(ctx, s.NodeConfigMap, dryRun, created) })
	}
	if s.Service != nil {
		g.Go(func() error { _, err := a.applyObject(ctx, s.Service, dryRun, created); return err })
	}
	if s.Ingress != nil {
		g.Go(func() error { _, err := a.applyObject(ctx, s.Ingress, dryRun, created); return err })
	}
	for _, r := range s.HTTPRoutes {
		g.Go(func() error { _, err := a.applyObject(ctx, r, dryRun, created); return err })
	}
	if s.NetworkPolicy != nil {
		g.Go(func() error { _, err := a.applyObject(ctx, s.NetworkPolicy, dryRun, created); return err })
	}
	for _, c := range s.Credentials() {
		g.Go(func() error { return a.replicate(ctx, c, dryRun) })
	}
	if s.Scripts != nil {
		g.Go(func() error { return a.applyScripts(ctx, s.Scripts, dryRun) })
	}
	if err := g.Wait(); err != nil || s.Deployment == nil {
		return nil, err
	}
	_, err := a.applyObject(ctx, s.Deployment, dryRun, created)
	return nil, err
}

// ensureNamespace creates the shadow namespace ns, or applies ns over the one of that name
// shadowgate created for the same pod namespace (its marker, inject.LabelShadowNamespaceFor,
// says so), and reports whether it existed. It is created, not applied with force: an apply
// would adopt whatever holds the name, and a tenant who may create namespaces could create
// <own-ns>-shadow to read the credential copies, or <victim>-shadow to receive the victim's
// shadows. A namespace of that name without the marker, or marked for another pod namespace,
// is refused (ForeignNamespaceError) and nothing is written into it. The read is uncached and
// happens once per namespaceMemory at most (knownNamespaces).
func (a *Applier) ensureNamespace(ctx context.Context, ns *corev1.Namespace, dryRun bool, created *createdObjects) (bool, error) {
	for range writeRounds {
		existing := &corev1.Namespace{}
		err := a.reader.Get(ctx, client.ObjectKeyFromObject(ns), existing)
		switch {
		case apierrors.IsNotFound(err):
			u, err := ToApply(ns, a.scheme)
			if err != nil {
				return false, err
			}
			u.SetLabels(withCreatedBy(u.GetLabels()))
			err = a.writes(dryRun).Create(ctx, u)
			if apierrors.IsAlreadyExists(err) {
				continue // created meanwhile, maybe by a tenant: judged on what is there now
			}
			if err != nil {
				return false, fmt.Errorf("creating %s: %w", DescribeObject("Namespace", ns), err)
			}
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading %s: %w", DescribeObject("Namespace", ns), err)
		}
		if want := ns.Labels[inject.LabelShadowNamespaceFor]; existing.Labels[inject.LabelShadowNamespaceFor] != want {
			return true, &ForeignNamespaceError{Namespace: ns.Name, PodNamespace: want, MarkedFor: existing.Labels[inject.LabelShadowNamespaceFor]}
		}
		if existing.DeletionTimestamp != nil {
			// The collector deleted it, as no shadow used it; the API server refuses new
			// objects in it until it is gone, and then it is created again.
			return true, apierrors.NewConflict(corev1.Resource("namespaces"), ns.Name,
				fmt.Errorf("the shadow namespace is being deleted, as no shadow used it any more; try again in a minute, once it is gone"))
		}
		// Ours: applied again, so its Pod Security label comes back if it was taken off.
		return a.applyObject(ctx, ns, dryRun, created)
	}
	return false, apierrors.NewConflict(schema.GroupResource{Resource: "namespaces"}, ns.Name,
		fmt.Errorf("it was created and deleted %d times while shadowgate was creating it; try again", writeRounds))
}

// applyScripts server-side applies the scripts ConfigMap cm, unless this process applied it
// within namespaceMemory: it is immutable and named by its content, so once there it stays as
// it is, and the namespace's next shadows need no write for it. An apply of the same content
// over it changes nothing, so the API server writes nothing either. It is not recorded in
// created: every shadow of the namespace mounts it, and the Collector deletes it once none does.
func (a *Applier) applyScripts(ctx context.Context, cm *corev1.ConfigMap, dryRun bool) error {
	key := scriptsKey(cm)
	if a.scripts.known(key) {
		return nil
	}
	u, err := ToApply(cm, a.scheme)
	if err != nil {
		return err
	}
	err = a.writes(dryRun).Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership)
	if immutableRefused(err) {
		// The one apply the API server refuses: a ConfigMap of that name, immutable, with
		// other content, which shadowgate did not write (its name is the hash of its content).
		return apierrors.NewConflict(corev1.Resource("configmaps"), cm.Namespace+"/"+cm.Name,
			fmt.Errorf("it exists and holds other content than shadowgate's scripts, which it cannot take as it is immutable: delete it (kubectl delete configmap -n %s %s) and shadowgate writes it again (%w)",
				cm.Namespace, cm.Name, err))
	}
	if err != nil {
		return fmt.Errorf("applying %s: %w", DescribeObject("ConfigMap", cm), err)
	}
	if !dryRun {
		a.scripts.add(key)
	}
	return nil
}

// immutableRefused says whether err is the API server refusing to change the data of an
// immutable ConfigMap: Invalid, for data or binaryData, Forbidden.
func immutableRefused(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeForbidden && (c.Field == "data" || c.Field == "binaryData") {
			return true
		}
	}
	return false
}

func scriptsKey(cm *corev1.ConfigMap) string { return cm.Namespace + "/" + cm.Name }

// withCreatedBy is labels with inject.LabelCreatedByShadowgate, for an object shadowgate
// creates and may therefore delete once nothing uses it. It goes on the Create only: the
// applies after it leave it where it is, and a namespace handed over never gets it.
func withCreatedBy(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[inject.LabelCreatedByShadowgate] = "true"
	return out
}

// ForeignNamespaceError is the refusal of a pod whose shadow namespace exists but is not
// shadowgate's for the pod's namespace: its message names the namespace, says why it is not
// used and how an admin hands it over. It is a Forbidden status, so kubectl shows the message.
type ForeignNamespaceError struct {
	Namespace    string // the shadow namespace
	PodNamespace string // the pod's namespace, whose shadows go there
	MarkedFor    string // the marker's value on the existing namespace; empty when unmarked
}

func (e *ForeignNamespaceError) Error() string {
	why := "it has no label " + inject.LabelShadowNamespaceFor + ", so shadowgate did not create it"
	if e.MarkedFor != "" {
		why = fmt.Sprintf("it is labelled %s=%s, the shadow namespace of another namespace", inject.LabelShadowNamespaceFor, e.MarkedFor)
	}
	return fmt.Sprintf("namespace %s, where the shadows of namespace %s go, already exists and %s; shadowgate writes nothing into a namespace it does not own, "+
		"as its owner could read the site credentials copied there and rewrite the shadows. If the namespace is meant for these shadows "+
		"(for example the virtual kubelet created it), a cluster admin hands it over with "+
		"`kubectl label namespace %s %s=%s --overwrite`; otherwise delete or rename it (docs/security.md, \"Shadow namespaces\")",
		e.Namespace, e.PodNamespace, why, e.Namespace, inject.LabelShadowNamespaceFor, e.PodNamespace)
}

// Status makes the refusal a Forbidden answer (refuseForShadow keeps the code and reason).
func (e *ForeignNamespaceError) Status() metav1.Status {
	return apierrors.NewForbidden(corev1.Resource("namespaces"), e.Namespace, e).ErrStatus
}

// Wait blocks until the removals of failed requests' objects still running have finished.
func (a *Applier) Wait() { a.cleanups.Wait() }

// writeRounds bounds the writes that lose a race to another writer: each lost race means the
// object was created, changed or deleted meanwhile; a few rounds settle it, and one that keeps
// changing is reported rather than chased.
const writeRounds = 3

// createNodeConfigMap creates the node ConfigMap with its empty compute-node. Once the
// ConfigMap exists compute-node is the virtual kubelet's, which writes the job's node there,
// so an existing one is written by writeExistingNodeConfigMap, which resets the node only
// when the ConfigMap is an earlier pod's. A ConfigMap deleted or changed between the read and
// the write is taken again from the start, for a few rounds.
func (a *Applier) createNodeConfigMap(ctx context.Context, cm *corev1.ConfigMap, dryRun bool, created *createdObjects) error {
	u, err := ToApply(cm, a.scheme)
	if err != nil {
		return err
	}
	for range writeRounds {
		err := a.writes(dryRun).Create(ctx, u)
		switch {
		case err == nil:
			if !dryRun {
				created.add(u)
			}
			return nil
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("creating %s: %w", DescribeObject("ConfigMap", cm), err)
		}
		if done, err := a.writeExistingNodeConfigMap(ctx, cm, dryRun, created); done || err != nil {
			return err
		}
	}
	return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, cm.Namespace+"/"+cm.Name,
		fmt.Errorf("it changed %d times while shadowgate was writing it for a new pod; try again", writeRounds))
}

// writeExistingNodeConfigMap writes cm over the node ConfigMap that exists, read uncached, and
// says whether it is done: false when that ConfigMap was deleted or changed meanwhile.
//   - Of this pod (same pod UID: a second admission, a re-apply by the reconciler), only its
//     metadata is applied: applying the key again would reset the node the virtual kubelet
//     wrote for this pod's job and, forced, take the field from it.
//   - Of an earlier pod of the same name (deleted and created again before the reconciler
//     removed its shadow: a StatefulSet, `kubectl replace --force`), it is written at the
//     resourceVersion read as a creation would have made it, compute-node empty (a merge
//     patch carrying that resourceVersion: shadowgate may patch any ConfigMap, but update
//     one only with credential replication). Kept, its node would be the earlier job's: the
//     new shadow's wait-for-node would pass at once and forward to a node that job has left,
//     possibly running another user's job. The object is not recorded in created: this
//     request did not bring it into being, so a failure of this request does not remove it
//     (the reconciler collects it if no pod keeps it).
func (a *Applier) writeExistingNodeConfigMap(ctx context.Context, cm *corev1.ConfigMap, dryRun bool, created *createdObjects) (bool, error) {
	existing := &corev1.ConfigMap{}
	err := a.reader.Get(ctx, client.ObjectKeyFromObject(cm), existing)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading %s: %w", DescribeObject("ConfigMap", cm), err)
	case existing.Labels[inject.LabelPodUID] == cm.Labels[inject.LabelPodUID]:
		metaOnly := cm.DeepCopy()
		metaOnly.Data = nil
		existed, err := a.applyObject(ctx, metaOnly, dryRun, created)
		if err == nil && !existed {
			// Deleted since the read, the apply made it anew, without the key: give it
			// the empty compute-node a creation gives. Nothing can have written one yet.
			_, err = a.applyObject(ctx, cm, dryRun, created)
		}
		return true, err
	}
	reset := existing.DeepCopy()
	reset.Labels, reset.Annotations = cm.Labels, cm.Annotations
	reset.Data, reset.BinaryData = cm.Data, cm.BinaryData
	err = a.writes(dryRun).Patch(ctx, reset, client.MergeFromWithOptions(existing, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("resetting the compute node of %s, left by an earlier pod of the same name: %w", DescribeObject("ConfigMap", cm), err)
	}
	return true, nil
}

// writes is the client every write of a shadow goes through: as shadowgate's field manager,
// and for a dry-run admission a dry run.
func (a *Applier) writes(dryRun bool) client.Client {
	c := client.WithFieldOwner(a.client, FieldManager)
	if dryRun {
		return client.NewDryRunClient(c)
	}
	return c
}

// applyObject server-side applies obj and reports whether it existed before: the API server
// answers an apply that created its object with 201 (dry run or not), so no read beforehand
// is needed; it sends back the object's metadata only (withAnswerMetadataOnly). An object this call brought into being is recorded in created, so a failure can
// take it back; a namespace is not, as other pods' shadows may have gone into it meanwhile.
func (a *Applier) applyObject(ctx context.Context, obj client.Object, dryRun bool, created *createdObjects) (bool, error) {
	u, err := ToApply(obj, a.scheme)
	if err != nil {
		return false, err
	}
	var status int
	gvk := u.GroupVersionKind()
	if err := a.writes(dryRun).Apply(withAnswerMetadataOnly(ctx, &status), client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("applying %s: %w", DescribeObject(gvk.Kind, obj), err)
	}
	// u now holds the answer, the stored object's metadata (its UID, for remove), as a
	// PartialObjectMetadata: it is the object's again.
	u.SetGroupVersionKind(gvk)
	existed := status != http.StatusCreated
	if _, isNamespace := obj.(*corev1.Namespace); !existed && !dryRun && !isNamespace {
		created.add(u)
	}
	return existed, nil
}

// ToApply renders a typed object as the apply request body. Only what the object sets is
// sent: the creation timestamp a typed object always carries and its empty status would
// otherwise be claimed by the field manager.
func ToApply(obj client.Object, scheme *runtime.Scheme) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

// remove deletes what a failed request created, newest first, each only if it is still the
// object this request made (same UID), so an object recreated meanwhile is never taken. A
// retry of the same pod that applied to these very objects in between loses them here; the
// precondition stays the UID alone because a resourceVersion would miss every object a
// controller has already touched (a Deployment's status), and the reconciler re-applies what
// a live pod's shadow lacks. Failures are logged: the reconciler collects leftover shadow
// objects after its grace period.
func (a *Applier) remove(ctx context.Context, created *createdObjects) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	objs := created.list()
	for i := len(objs) - 1; i >= 0; i-- {
		obj := objs[i]
		uid := obj.GetUID()
		err := a.client.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			log.FromContext(ctx).Error(err, "could not remove an object of a refused pod's shadow; remove it by hand if it is not collected",
				"shadowObject", DescribeObject(obj.GetKind(), obj))
		}
	}
}

// createdObjects collects, from concurrent applies, the objects a request created.
type createdObjects struct {
	mu   sync.Mutex
	objs []*unstructured.Unstructured
}

func (c *createdObjects) add(u *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objs = append(c.objs, u)
}

func (c *createdObjects) list() []*unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*unstructured.Unstructured(nil), c.objs...)
}

// DescribeObject names an object as a message does: "Deployment user-shadow/trainer-user".
func DescribeObject(kind string, obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}
