package shadows

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/policystore"
	"github.com/interlink-hq/shadowgate/validate"
)

// Identity knows where shadowgate's objects are (DESIGN.md "Identity"): at the namespaces
// and names it derives from pods, and in namespaces carrying the mark only shadowgate and the
// cluster admins can set (inject.LabelShadowNamespaceFor, guarded by the API server's
// shadowgate-shadow-namespace-marker policy). Labels and annotations a tenant can write
// (managed-by, pod-uid, shadow-for, replicated-from) prove nothing here: an object elsewhere
// that carries them is not shadowgate's, and is neither read nor written.
//
// Its reads are the manager's cache (namespace metadata, pods, shadow Deployments), with one
// uncached read of a namespace the cache has not seen yet (cachedNamespaces).
type Identity struct {
	Namespaces policystore.Namespaces // the labels of namespaces (cachedNamespaces)
	Cache      client.Reader          // the manager's cache: pods and shadow Deployments
	Policies   policystore.Policies
	Rules      validate.CredentialRules
	// GatewayAPI is set when the API server serves HTTPRoutes (GatewayAPIServed): the cache
	// holds front doors' HTTPRoutes among the shadow objects.
	GatewayAPI bool
}

// ShadowNamespaceFor is the pod namespace whose shadow namespace ns is, or "": ns must carry
// the mark for a pod namespace P and be the namespace shadowgate derives for P's shadows
// (inject.ShadowNamespace). A namespace that does not exist is no one's.
func (id Identity) ShadowNamespaceFor(ctx context.Context, ns string) (string, error) {
	labels, err := id.Namespaces.Labels(ctx, ns)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	podNS := labels[inject.LabelShadowNamespaceFor]
	if podNS == "" || inject.ShadowNamespace(podNS, false) != ns {
		return "", nil
	}
	return podNS, nil
}

// Objects are the cached objects of the shadow of the pod podKey (<ns>/<name>), of any
// pod UID (the reconciler tells its pod's from an orphan's, the tunnel reporter keeps its
// pod's): those found by their interlink.eu/shadow-for that are where shadowgate puts that
// pod's shadow (isShadowOf). One elsewhere that claims the pod is no shadow of it: it is never
// read, rolled, reported or deleted.
func (id Identity) Objects(ctx context.Context, podKey string) ([]client.Object, error) {
	ns, name, ok := SplitKey(podKey)
	if !ok {
		return nil, nil
	}
	objs, err := ListKinds(ctx, id.Cache, id.GatewayAPI, client.MatchingFields{IndexShadowFor: podKey})
	if err != nil {
		return nil, err
	}
	out := objs[:0]
	for _, obj := range objs {
		ok, err := id.isShadowOf(ctx, obj, ns, name)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, obj)
		}
	}
	return out, nil
}

// isShadowOf says whether obj is at a namespace and name shadowgate derives for the shadow of
// the pod podNS/podName: the shadow's name (Deployment, Service, NetworkPolicy, Ingress), its
// node ConfigMap's or, for an HTTPRoute, one of its route names (inject.RouteName), in the pod
// namespace's marked shadow namespace (ShadowNamespaceFor) or, for a shadow beside its pod
// (interlink.eu/shadow-same-ns), in podNS itself.
func (id Identity) isShadowOf(ctx context.Context, obj client.Object, podNS, podName string) (bool, error) {
	_, isRoute := obj.(*gatewayv1.HTTPRoute)
	for _, beside := range []bool{false, true} {
		shadow := inject.ShadowName(podName, podNS, beside)
		named := obj.GetName() == shadow || obj.GetName() == inject.NodeConfigMapName(shadow)
		if isRoute {
			named = inject.IsRouteName(shadow, obj.GetName())
		}
		if obj.GetNamespace() != inject.ShadowNamespace(podNS, beside) || !named {
			continue
		}
		if beside {
			return true, nil
		}
		markedFor, err := id.ShadowNamespaceFor(ctx, obj.GetNamespace())
		return markedFor == podNS, err
	}
	return false, nil
}

// MayHoldCopy says whether c is a place for a credential copy, where shadowgate may create,
// update, adopt or delete one: a shadow namespace (ShadowNamespaceFor), or, only when the rules
// allow copies into pod namespaces, a pod namespace where a shadow beside its pod mounts c
// (sameNamespaceCopies). Admission needs no such lookup: it writes copies only where the
// shadow of the pod it admits goes, the shadow namespace it has just found marked (or
// created) or, when the rules allow it, the pod's own.
func (id Identity) MayHoldCopy(ctx context.Context, c inject.Credential) (bool, error) {
	if podNS, err := id.ShadowNamespaceFor(ctx, c.Namespace); err != nil || podNS != "" {
		return podNS != "", err
	}
	copies, err := id.sameNamespaceCopies(ctx, c.Namespace)
	return slices.Contains(copies, c), err
}

// HoldsCopies says whether ns is a place for credential copies at all: a shadow namespace, or
// a pod namespace where a shadow beside its pod mounts one.
func (id Identity) HoldsCopies(ctx context.Context, ns string) (bool, error) {
	if podNS, err := id.ShadowNamespaceFor(ctx, ns); err != nil || podNS != "" {
		return podNS != "", err
	}
	copies, err := id.sameNamespaceCopies(ctx, ns)
	return len(copies) > 0, err
}

// sameNamespaceCopies are the credential copies the shadows beside their pods in namespace ns
// mount: none unless the rules allow copies into pod namespaces. A pod counts if it is live,
// the policy in force gives it a shadow in its own namespace (interlink.eu/shadow-same-ns, on
// a virtual node that allows the namespace), and that shadow's Deployment exists at the name
// shadowgate derives from the pod, for the pod's UID. What counts is the pod the policy
// admits, not the Deployment: one that anyone can write in ns is only a cheap first filter.
func (id Identity) sameNamespaceCopies(ctx context.Context, ns string) ([]inject.Credential, error) {
	if id.Rules.WithoutCopiesInPodNamespaces {
		return nil, nil
	}
	pods := &corev1.PodList{}
	if err := id.Cache.List(ctx, pods, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []inject.Credential
	var cfg *validate.Config // the namespace's, read once a pod needs it
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || Finished(p) || p.Annotations[validate.AnnotationShadowSameNS] != "true" {
			continue
		}
		d := &appsv1.Deployment{}
		err := id.Cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: inject.ShadowName(p.Name, ns, true)}, d, client.UnsafeDisableDeepCopy)
		if apierrors.IsNotFound(err) || (err == nil && types.UID(d.Labels[inject.LabelPodUID]) != p.UID) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if cfg == nil {
			c, err := policystore.Configs{Policies: id.Policies, Fixed: validate.Config{Credentials: id.Rules}, Namespaces: id.Namespaces}.Now(ctx, ns)
			if err != nil {
				return nil, err
			}
			cfg = &c
		}
		a := inject.Admit(p.DeepCopy(), *cfg) // p is the cache's own object
		if !a.Decision.Allowed() || a.Shadow == nil || a.Shadow.Namespace != nil || a.Shadow.Deployment.Name != d.Name {
			continue
		}
		for _, c := range a.Shadow.Credentials() {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out, nil
}
