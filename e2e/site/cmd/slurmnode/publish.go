package main

import (
	"context"
	"errors"
	"log"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The labels shadowgate gives the pod's node ConfigMap, and the key the shadow reads: the
// node finds the ConfigMap by them rather than by repeating shadowgate's naming rules.
const (
	podUIDLabel     = "interlink.eu/pod-uid"
	shadowRoleLabel = "interlink.eu/shadow-role"
	computeNodeKey  = "compute-node"
)

// publish writes addr (empty: clears it) into key compute-node of every ConfigMap labelled as
// the pod's node ConfigMap, in any namespace (the shadow's namespace depends on the pod), and
// says how many there are: none yet, and the next poll looks again.
func (p *provider) publish(ctx context.Context, pod *corev1.Pod, addr string) (int, error) {
	selector := labels.Set{podUIDLabel: string(pod.UID), shadowRoleLabel: "node"}.String()
	list, err := p.client.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, err
	}
	var errs []error
	for i := range list.Items {
		cm := &list.Items[i]
		if cm.Data[computeNodeKey] == addr {
			continue
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[computeNodeKey] = addr
		if _, err := p.client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, err)
			continue
		}
		log.Printf("pod %s/%s: compute node %q written to ConfigMap %s/%s", pod.Namespace, pod.Name, addr, cm.Namespace, cm.Name)
	}
	return len(list.Items), errors.Join(errs...)
}
