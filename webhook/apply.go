package webhook

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"golang.org/x/sync/errgroup"

	"github.com/interlink-hq/shadowgate/inject"
)

// FieldManager owns every field shadowgate applies.
const FieldManager = "shadowgate"

// cleanupTimeout bounds the removal of a failed request's objects. It runs on its own clock:
// the request's may be what ran out, and leaving objects behind is worse than answering late.
const cleanupTimeout = 10 * time.Second

// Applier server-side applies shadows and copies the credentials they mount.
type Applier struct {
	client client.Client // writes
	reader client.Reader // uncached reads: whether an object exists, credential contents
	scheme *runtime.Scheme
	// credentialsNamespace is where the policy's Secrets and ConfigMaps are copied from.
	credentialsNamespace string
	metrics              *Metrics
}

// Apply applies a shadow: its namespace first, then the node ConfigMap, Service and
// credentials together, then the Deployment, which mounts them, so its pods never start
// before what they mount exists. On an error nothing this call created is left behind.
// A dry run applies with dry-run and persists nothing.
func (a *Applier) Apply(ctx context.Context, s *inject.Shadow, dryRun bool) ([]string, error) {
	start := time.Now()
	created := &createdObjects{}
	warnings, err := a.apply(ctx, s, dryRun, created)
	outcome := "ok"
	if err != nil {
		outcome = "error"
		a.remove(ctx, created)
	}
	a.metrics.applySeconds.WithLabelValues(outcome, strconv.FormatBool(dryRun)).Observe(time.Since(start).Seconds())
	return warnings, err
}

func (a *Applier) apply(ctx context.Context, s *inject.Shadow, dryRun bool, created *createdObjects) ([]string, error) {
	if s.Namespace != nil {
		existed, err := a.applyObject(ctx, s.Namespace, dryRun, created)
		if err != nil {
			return nil, err
		}
		if dryRun && !existed {
			// Objects cannot be dry-run into a namespace that does not exist.
			return []string{fmt.Sprintf("dry run: the shadow's namespace %s does not exist yet, so only its creation was checked, not the objects that go into it", s.Namespace.Name)}, nil
		}
	}
	// The first failure does not cancel the others: an apply cut short on the client may
	// still have created its object on the server, and then nobody would know to remove it.
	var g errgroup.Group
	g.Go(func() error { _, err := a.applyObject(ctx, s.NodeConfigMap, dryRun, created); return err })
	if s.Service != nil {
		g.Go(func() error { _, err := a.applyObject(ctx, s.Service, dryRun, created); return err })
	}
	for _, c := range s.Credentials() {
		g.Go(func() error { return a.replicate(ctx, c, dryRun, created) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	_, err := a.applyObject(ctx, s.Deployment, dryRun, created)
	return nil, err
}

// applyObject server-side applies obj and reports whether it existed before. An object this
// call brought into being is recorded in created, so a failure can take it back.
func (a *Applier) applyObject(ctx context.Context, obj client.Object, dryRun bool, created *createdObjects) (bool, error) {
	gvk, err := apiutil.GVKForObject(obj, a.scheme)
	if err != nil {
		return false, err
	}
	what := describeObject(gvk.Kind, obj)
	probe := &metav1.PartialObjectMetadata{}
	probe.SetGroupVersionKind(gvk)
	existed := true
	if err := a.reader.Get(ctx, client.ObjectKeyFromObject(obj), probe); apierrors.IsNotFound(err) {
		existed = false
	} else if err != nil {
		return false, fmt.Errorf("reading %s: %w", what, err)
	}
	u, err := toApply(obj, a.scheme)
	if err != nil {
		return existed, err
	}
	opts := []client.ApplyOption{client.FieldOwner(FieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		return existed, fmt.Errorf("applying %s: %w", what, err)
	}
	if !existed && !dryRun {
		created.add(u)
	}
	return existed, nil
}

// toApply renders a typed object as the apply request body. Only what the object sets is
// sent: the creation timestamp a typed object always carries and its empty status would
// otherwise be claimed by the field manager.
func toApply(obj client.Object, scheme *runtime.Scheme) (*unstructured.Unstructured, error) {
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
// object this request made (same UID), so a concurrent request's object is never taken.
// Failures are logged: the reconciler collects leftover shadow objects after its grace period.
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
				"shadowObject", describeObject(obj.GetKind(), obj))
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

// describeObject names an object as a message does: "Deployment user-shadow/shadow-trainer-user".
func describeObject(kind string, obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}
