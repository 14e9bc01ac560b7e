package shadows

import (
	"context"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

// Pods are the live pods of pod's shadow Deployment d in the cache: selected by it, owned
// by one of its ReplicaSets, and labelled and annotated for pod. Anyone who may create pods in
// d's namespace can label one so; only the ReplicaSet's own are believed.
func Pods(ctx context.Context, cache client.Reader, d *appsv1.Deployment, pod *corev1.Pod) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil, nil //nolint:nilerr // a shadow Deployment without a usable selector has no pod to read
	}
	list := &corev1.PodList{}
	if err := cache.List(ctx, list, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	key := pod.Namespace + "/" + pod.Name
	var pods []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp == nil && types.UID(p.Labels[inject.LabelPodUID]) == pod.UID && p.Annotations[inject.AnnotationShadowFor] == key && ownedByDeployment(p, d) {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// IsShadowPod says whether o carries the labels and annotation of a shadow pod. Anyone who may
// create pods can write those: a shadow pod is believed only as one of its shadow Deployment's
// own (Pods).
func IsShadowPod(o client.Object) bool {
	return o.GetLabels()[inject.LabelManagedBy] == inject.ManagedBy && o.GetAnnotations()[inject.AnnotationShadowFor] != ""
}

// Started says whether there are pods and each has started: one of its containers, an init
// container or not, runs or has exited 0, so its image was pulled and runs. A queued job's
// shadow pod runs only its wait-for-node.
func Started(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if !slices.ContainsFunc(slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses), func(cs corev1.ContainerStatus) bool {
			return cs.State.Running != nil || (cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0)
		}) {
			return false
		}
	}
	return len(pods) > 0
}

// ownedByDeployment says whether pod's controller is a ReplicaSet of d: the Deployment
// controller names them <deployment>-<hash>.
func ownedByDeployment(pod *corev1.Pod, d *appsv1.Deployment) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "ReplicaSet" && strings.HasPrefix(ref.Name, d.Name+"-")
}

// MountedCredentials names the Secrets and ConfigMaps a pod spec mounts, as "<Kind>/<name>".
func MountedCredentials(spec *corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		switch {
		case v.Secret != nil:
			out = append(out, "Secret/"+v.Secret.SecretName)
		case v.ConfigMap != nil:
			out = append(out, "ConfigMap/"+v.ConfigMap.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					out = append(out, "Secret/"+s.Secret.Name)
				}
				if s.ConfigMap != nil {
					out = append(out, "ConfigMap/"+s.ConfigMap.Name)
				}
			}
		}
	}
	return out
}

// UsedCredentials names the Secrets and ConfigMaps a shadow object uses, as "<Kind>/<name>":
// those a Deployment's pods mount (MountedCredentials), and the TLS Secrets an Ingress names.
func UsedCredentials(obj client.Object) []string {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return MountedCredentials(&o.Spec.Template.Spec)
	case *networkingv1.Ingress:
		var out []string
		for _, tls := range o.Spec.TLS {
			if tls.SecretName != "" {
				out = append(out, "Secret/"+tls.SecretName)
			}
		}
		return out
	}
	return nil
}

// PhaseEnded says whether a pod update moved the pod into a terminal phase, which ends its
// shadow. Pods never leave Succeeded or Failed, so this is seen once per pod.
func PhaseEnded(oldObj, newObj client.Object) bool {
	oldPod, ok1 := oldObj.(*corev1.Pod)
	newPod, ok2 := newObj.(*corev1.Pod)
	return ok1 && ok2 && oldPod.Status.Phase != newPod.Status.Phase && Finished(newPod)
}

// MayHaveShadow mirrors the pod webhooks' matchCondition offloaded-pod
// (manifests/base/webhooks.yaml; the tests' offloadedPodCondition holds its text): a pod
// with no interLink annotation (interlink.eu/shadow-for, a shadow pod's, does not count), no
// toleration of the virtual node's taint and no spec.nodeName was never sent to /validate-pods,
// so it has no shadow, and most of a cluster's pods need no reconciling. Where the condition
// sends every pod with a spec.nodeName, isVirtualNode narrows it to those on a node the policy
// lists: every pod is bound to a node once scheduled, and a pod elsewhere has no shadow.
func MayHaveShadow(o client.Object, isVirtualNode func(string) bool) bool {
	for k := range o.GetAnnotations() {
		if (strings.HasPrefix(k, "interlink.eu/") && k != inject.AnnotationShadowFor) || k == validate.AnnotationPreExec {
			return true
		}
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return false
	}
	for _, t := range pod.Spec.Tolerations {
		if t.Key == validate.TolerationVirtualNode || (t.Key == "" && t.Operator == corev1.TolerationOpExists) {
			return true
		}
	}
	return pod.Spec.NodeName != "" && isVirtualNode(pod.Spec.NodeName)
}

// AnyNode takes every node for a virtual node.
func AnyNode(string) bool { return true }
