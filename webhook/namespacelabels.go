package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/validate"
)

// namespaceMeta is a Namespace read as metadata only: its labels are all a decision needs, and
// the cache then holds no namespace's spec or status.
var namespaceMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}

// Namespaces gives a decision the labels of the namespace of the object it judges, which a
// virtual node's AllowedNamespaceSelector matches.
type Namespaces interface {
	Labels(ctx context.Context, name string) (map[string]string, error)
}

// cachedNamespaces reads namespaces from the manager's cache, and from the API server when the
// cache has not seen one yet: a namespace created a moment before its first pod may not have
// reached the watch, and refusing that pod would be wrong.
type cachedNamespaces struct {
	cache, live client.Reader
}

// Labels implements Namespaces.
func (n cachedNamespaces) Labels(ctx context.Context, name string) (map[string]string, error) {
	ns := &metav1.PartialObjectMetadata{TypeMeta: namespaceMeta}
	key := client.ObjectKey{Name: name}
	err := n.cache.Get(ctx, key, ns)
	if apierrors.IsNotFound(err) {
		err = n.live.Get(ctx, key, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the labels of namespace %s, which decide whether its pods may use a virtual node: %w", name, err)
	}
	return ns.Labels, nil
}

// configs gives each decision its validate.Config: the policy in force, with the fixed rest,
// and the labels of the object's namespace, read once for the request and only when a
// virtual node of the policy selects namespaces by label. namespaces nil reads none, so a
// namespace is known by its name alone (handler tests).
type configs struct {
	policies   Policies
	fixed      validate.Config
	namespaces Namespaces
}

func (c configs) now(ctx context.Context, namespace string) (validate.Config, error) {
	cfg := c.fixed
	cfg.Policy = c.policies.Current()
	if c.namespaces == nil || namespace == "" || !cfg.Policy.SelectsNamespaces() {
		return cfg, nil
	}
	labels, err := c.namespaces.Labels(ctx, namespace)
	cfg.NamespaceLabels = labels
	return cfg, err
}
