package policystore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/validate"
)

// NamespaceMeta is a Namespace read as metadata only: its labels are all a decision needs, and
// the cache then holds no namespace's spec or status.
var NamespaceMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}

// Namespaces gives a decision the labels of the namespace of the object it judges, which a
// virtual node's AllowedNamespaceSelector matches.
type Namespaces interface {
	Labels(ctx context.Context, name string) (map[string]string, error)
}

// CachedNamespaces reads namespaces from the manager's cache, and from the API server when the
// cache has not seen one yet: a namespace created a moment before its first pod may not have
// reached the watch, and refusing that pod would be wrong.
type CachedNamespaces struct {
	Cache, Live client.Reader
}

// Labels implements Namespaces.
func (n CachedNamespaces) Labels(ctx context.Context, name string) (map[string]string, error) {
	ns := &metav1.PartialObjectMetadata{TypeMeta: NamespaceMeta}
	key := client.ObjectKey{Name: name}
	err := n.Cache.Get(ctx, key, ns)
	if apierrors.IsNotFound(err) {
		err = n.Live.Get(ctx, key, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the labels of namespace %s, which decide whether its pods may use a virtual node: %w", name, err)
	}
	return ns.Labels, nil
}

// Configs gives each decision its validate.Config: the policy in force, with the fixed rest,
// and the labels of the object's namespace, read once for the request and only when a
// virtual node of the policy selects namespaces by label. namespaces nil reads none, so a
// namespace is known by its name alone (handler tests).
type Configs struct {
	Policies   Policies
	Fixed      validate.Config
	Namespaces Namespaces
}

// Now is the validate.Config of a decision on an object of namespace.
func (c Configs) Now(ctx context.Context, namespace string) (validate.Config, error) {
	cfg := c.Fixed
	cfg.Policy = c.Policies.Current()
	if c.Namespaces == nil || namespace == "" || !cfg.Policy.SelectsNamespaces() {
		return cfg, nil
	}
	labels, err := c.Namespaces.Labels(ctx, namespace)
	cfg.NamespaceLabels = labels
	return cfg, err
}
