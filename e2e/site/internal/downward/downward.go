// Package downward resolves the downward API's fieldRef paths against a pod as the kubelet
// does, for env and for downwardAPI volume files: the one table both site nodes use.
package downward

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ErrNotKnown is wrapped by Field for a status field asked while the pod has no IP yet.
var ErrNotKnown = errors.New("not known yet")

// Field is the value of path for pod. podIP is what status.podIP(s) and status.hostIP(s) are
// (every site pod shares its node's address); "" refuses them with ErrNotKnown. The whole
// metadata.labels and metadata.annotations come one key="value" a line, sorted, as the kubelet
// writes them into a volume file.
func Field(pod *corev1.Pod, path, podIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs":
		if podIP == "" {
			return "", fmt.Errorf("%s is %w", path, ErrNotKnown)
		}
		return podIP, nil
	}
	if k, ok := bracketKey(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := bracketKey(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// bracketKey is the key of path when it is field['key'].
func bracketKey(path, field string) (string, bool) {
	rest, ok := strings.CutPrefix(path, field+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}
