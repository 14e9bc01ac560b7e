package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// networkPolicyValues enable the chart's NetworkPolicy with a control plane node as the
// webhook's caller and a monitoring namespace as the metrics scraper.
var networkPolicyValues = []string{"--set", "networkPolicy.enabled=true",
	"--set", "networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.10/32",
	"--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring"}

// The NetworkPolicy is off by default; enabled, it admits the webhook port only from the given
// peers and the metrics port only from its own, and leaves out what nothing was given for
// (the probes port); enabled without webhook peers, the chart refuses to render rather than
// admit every source.
func TestChartNetworkPolicy(t *testing.T) {
	if _, ok := parseRendered(t, helmTemplate(t))["NetworkPolicy/shadowgate"]; ok {
		t.Error("the chart renders a NetworkPolicy by default")
	}
	var np networkingv1.NetworkPolicy
	parseRendered(t, helmTemplate(t, networkPolicyValues...)).typed(t, "NetworkPolicy/shadowgate", &np)
	port := func(name string) []networkingv1.NetworkPolicyPort {
		p := intstr.FromString(name)
		return []networkingv1.NetworkPolicyPort{{Port: &p}}
	}
	want := []networkingv1.NetworkPolicyIngressRule{
		{Ports: port("webhook"), From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.10/32"}}}},
		{Ports: port("metrics"), From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: np.Spec.Ingress[1].From[0].NamespaceSelector}}},
	}
	if d := cmp.Diff(want, np.Spec.Ingress); d != "" || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("ingress rules (-want +got):\n%s\npolicy types %v", d, np.Spec.PolicyTypes)
	}
	if got := np.Spec.Ingress[1].From[0].NamespaceSelector.MatchLabels["name"]; got != "monitoring" {
		t.Errorf("the metrics peer selects namespace %q, want monitoring", got)
	}
	_, err := runHelm(t, "template", "shadowgate", chartDir, "--set", "networkPolicy.enabled=true")
	if err == nil || !strings.Contains(err.Error(), "networkPolicy.webhookFrom must list where the API server's webhook calls come from") {
		t.Errorf("enabled without webhookFrom: got %v, want a refusal naming networkPolicy.webhookFrom", err)
	}
}

// clientCAConfigMap mounts the ConfigMap and runs serve with --client-ca-file on its ca.crt;
// by default neither.
func TestChartClientCA(t *testing.T) {
	const arg = "--client-ca-file=/etc/shadowgate/client-ca/ca.crt"
	if args := serveArgs(t, parseRendered(t, helmTemplate(t))); slices.Contains(args, arg) {
		t.Errorf("by default serve runs with %s", arg)
	}
	r := parseRendered(t, helmTemplate(t, "--set", "clientCAConfigMap=apiserver-webhook-client-ca"))
	if args := serveArgs(t, r); !slices.Contains(args, arg) {
		t.Errorf("serve runs without %s: %q", arg, args)
	}
	var d struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	r.typed(t, "Deployment/shadowgate", &d)
	pod := d.Spec.Template.Spec
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == "apiserver-webhook-client-ca" && v.Name == "client-ca"
	}) || !slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "client-ca" && m.MountPath == "/etc/shadowgate/client-ca"
	}) {
		t.Errorf("the ConfigMap is not mounted at /etc/shadowgate/client-ca: volumes %+v, mounts %+v", pod.Volumes, pod.Containers[0].VolumeMounts)
	}
}
