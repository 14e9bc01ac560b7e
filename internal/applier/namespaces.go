package applier

import (
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// knownNamespaces remembers the shadow namespaces this process applied lately, so that pods
// arriving together in one namespace apply it once rather than once each: every apply of an
// unchanged namespace still cost the API server a server-side apply. A remembered namespace
// is applied again once namespaceMemory has passed, and at once when a write finds it gone
// (Applier.apply), so no shadow waits for it. The namespace's own fields, its Pod Security
// label above all, are therefore re-applied at most once a minute per replica, by the first
// shadow after namespaceMemory: a label removed meanwhile stays off until then. The Applier
// keeps a second one, keyed "<namespace>/<name>", for the scripts ConfigMaps it applied
// (applyScripts).
type knownNamespaces struct {
	mu    sync.Mutex
	until map[string]time.Time
	// now is the clock, time.Now when nil; tests set it.
	now func() time.Time
}

const (
	namespaceMemory = time.Minute
	// maxKnownNamespaces bounds the memory; past it, the expired go, or else all: a forgotten
	// namespace is only applied once more.
	maxKnownNamespaces = 1024
)

func (k *knownNamespaces) clock() time.Time {
	if k.now == nil {
		return time.Now()
	}
	return k.now()
}

func (k *knownNamespaces) known(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.clock().Before(k.until[name])
}

func (k *knownNamespaces) add(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.until == nil {
		k.until = map[string]time.Time{}
	}
	now := k.clock()
	if len(k.until) >= maxKnownNamespaces {
		for n, t := range k.until {
			if !now.Before(t) {
				delete(k.until, n)
			}
		}
	}
	if len(k.until) >= maxKnownNamespaces {
		clear(k.until)
	}
	k.until[name] = now.Add(namespaceMemory)
}

func (k *knownNamespaces) forget(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.until, name)
}

// IsMissingNamespace reports whether err is the API server's answer to a write into a
// namespace that does not exist.
func IsMissingNamespace(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "namespaces"
}
