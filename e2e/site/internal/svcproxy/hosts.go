package svcproxy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Hosts renders a pod's /etc/hosts: the kubelet's localhost lines and the pod's own hostname
// (on the node's address, since pods share its network), then one line per Service with a
// ClusterIP, under the names cluster DNS answers for it (the bare name only for Services of the
// pod's own namespace, as the search path would resolve it).
func Hosts(podName, podNamespace, podIP string, services []*corev1.Service) string {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file (site processnode).\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	fmt.Fprintf(&b, "%s\t%s\n", podIP, podName)
	sorted := append([]*corev1.Service(nil), services...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Namespace != sorted[j].Namespace {
			return sorted[i].Namespace < sorted[j].Namespace
		}
		return sorted[i].Name < sorted[j].Name
	})
	for _, s := range sorted {
		addr, err := netip.ParseAddr(s.Spec.ClusterIP)
		if err != nil {
			continue // headless: cluster DNS would answer with its pods, which this file cannot follow
		}
		n, ns := s.Name, s.Namespace
		fmt.Fprintf(&b, "%s\t%s.%s.svc.cluster.local %s.%s.svc %s.%s", addr, n, ns, n, ns, n, ns)
		if ns == podNamespace {
			fmt.Fprintf(&b, " %s", n)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
