package applier

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// CredentialSources reads the Secrets and ConfigMaps of the credentials namespace from a
// cache of that namespace alone once it has synced, and from the API server before, or when
// the cache has no such object (one created a moment ago), so a source is never missing only
// because the cache lags. A source a moment stale is safe to copy: its change, once cached,
// has the follower check every copy again.
type CredentialSources struct {
	cache  cache.Cache
	live   client.Reader
	synced atomic.Bool
}

var _ manager.LeaderElectionRunnable = (*CredentialSources)(nil)

// ObjectGetter reads one object: a client.Reader, or CredentialSources.
type ObjectGetter interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// NewCredentialSources makes the cache of namespace's Secrets and ConfigMaps (the Role
// shadowgate-credential-sources lets it list and watch them there, and nowhere else), and
// adds it and the reader to mgr, to run on every replica.
func NewCredentialSources(ctx context.Context, mgr manager.Manager, namespace string) (*CredentialSources, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return nil, err
		}
	}
	s := &CredentialSources{cache: c, live: mgr.GetAPIReader()}
	for _, r := range []manager.Runnable{c, s} {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Cache is the cache of the credentials namespace's Secrets and ConfigMaps, which the
// credential follower watches.
func (s *CredentialSources) Cache() cache.Cache { return s.cache }

// Start marks the cache synced once it is.
func (s *CredentialSources) Start(ctx context.Context) error {
	if s.cache.WaitForCacheSync(ctx) {
		s.synced.Store(true)
	}
	return nil
}

// NeedLeaderElection is false: every replica admits pods and reads sources.
func (s *CredentialSources) NeedLeaderElection() bool { return false }

func (s *CredentialSources) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if s.synced.Load() {
		err := s.cache.Get(ctx, key, obj, opts...)
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	return s.live.Get(ctx, key, obj, opts...)
}
