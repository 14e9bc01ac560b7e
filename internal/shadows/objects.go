package shadows

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

// IndexShadowFor indexes cached shadow objects by the pod they stand in for (<ns>/<pod>).
const IndexShadowFor = "shadowFor"

// Kinds are the namespaced shadow objects, which the manager's cache holds: with gatewayAPI
// (the API server serves HTTPRoutes: GatewayAPIServed) the HTTPRoutes of front doors too.
func Kinds(gatewayAPI bool) []client.ObjectList {
	kinds := []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &networkingv1.NetworkPolicyList{}, &networkingv1.IngressList{}}
	if gatewayAPI {
		kinds = append(kinds, &gatewayv1.HTTPRouteList{})
	}
	return kinds
}

// Objects are one object of each kind of Kinds, for the manager's cache and watches.
func Objects(gatewayAPI bool) []client.Object {
	objs := []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}, &networkingv1.NetworkPolicy{}, &networkingv1.Ingress{}}
	if gatewayAPI {
		objs = append(objs, &gatewayv1.HTTPRoute{})
	}
	return objs
}

// GatewayAPIServed says whether the API server serves the Gateway API's HTTPRoutes, which a
// front door of kind HTTPRoute writes: the shadow objects the cache holds include them only
// then, as a cache of a kind the API server does not serve never syncs.
func GatewayAPIServed(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the API server whether it serves %s: %w", gatewayv1.GroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Kind == "HTTPRoute" {
			return true, nil
		}
	}
	return false, nil
}

// ShadowForIndex is the value of IndexShadowFor: the pod a shadow object stands in for.
func ShadowForIndex(o client.Object) []string {
	if v := o.GetAnnotations()[inject.AnnotationShadowFor]; v != "" {
		return []string{v}
	}
	return nil
}

// Finished says whether the pod is in a terminal phase: its containers have all stopped and
// will not be restarted.
func Finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// ListKinds lists every kind of Kinds with opts, in that order.
func ListKinds(ctx context.Context, c client.Reader, gatewayAPI bool, opts ...client.ListOption) ([]client.Object, error) {
	var objs []client.Object
	for _, list := range Kinds(gatewayAPI) {
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		err := apimeta.EachListItem(list, func(o runtime.Object) error {
			objs = append(objs, o.(client.Object))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return objs, nil
}

func SplitKey(key string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(key, "/")
	return namespace, name, ok && namespace != "" && name != ""
}

// Selector selects the objects of shadows: shadowgate's, but not the scripts ConfigMaps,
// which belong to no shadow, are most of the bytes shadowgate writes, and are read only by
// the collector, from the API server. The manager's cache holds what it selects.
var Selector = func() labels.Selector {
	notScripts, err := labels.NewRequirement(validate.LabelShadowRole, selection.NotEquals, []string{inject.ShadowRoleScripts})
	if err != nil {
		panic(err) // a constant label and value
	}
	return labels.SelectorFromSet(labels.Set{inject.LabelManagedBy: inject.ManagedBy}).Add(*notScripts)
}()
