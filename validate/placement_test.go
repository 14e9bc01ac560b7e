package validate_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate"
)

func TestVirtualNodeFor(t *testing.T) {
	several := mustPolicy(t, testPolicy)
	single := mustPolicy(t, "virtualNodes:\n  hpc-vk: {}\n")
	tolerates := []corev1.Toleration{{Key: validate.TolerationVirtualNode, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	cases := map[string]struct {
		spec     corev1.PodSpec
		single   bool
		wantNode string
		wantOK   bool
	}{
		"spec.nodeName names a listed node": {spec: corev1.PodSpec{NodeName: "hpc-vk"}, wantNode: "hpc-vk", wantOK: true},
		"spec.nodeName wins over the node selector": {spec: corev1.PodSpec{NodeName: "worker-1",
			NodeSelector: map[string]string{validate.LabelHostname: "hpc-vk"}}, wantNode: "worker-1"},
		"the hostname node selector names a listed node": {spec: corev1.PodSpec{
			NodeSelector: map[string]string{validate.LabelHostname: "socks-vk"}}, wantNode: "socks-vk", wantOK: true},
		"a node selector for an unlisted node belongs to none": {spec: corev1.PodSpec{
			NodeSelector: map[string]string{validate.LabelHostname: "worker-1"}}, wantNode: "worker-1"},
		"the toleration alone picks the only listed node":        {spec: corev1.PodSpec{Tolerations: tolerates}, single: true, wantNode: "hpc-vk", wantOK: true},
		"the toleration alone picks nothing among several nodes": {spec: corev1.PodSpec{Tolerations: tolerates}},
		"a wildcard toleration tolerates the virtual node": {spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
			single: true, wantNode: "hpc-vk", wantOK: true},
		"without the toleration a pod stays off the only node": {spec: corev1.PodSpec{}, single: true},
		"a toleration for another effect does not count": {spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: validate.TolerationVirtualNode,
			Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}}, single: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pol := several
			if tc.single {
				pol = single
			}
			node, ok := validate.VirtualNodeFor(&tc.spec, pol)
			if node != tc.wantNode || ok != tc.wantOK {
				t.Errorf("VirtualNodeFor = %q, %v; want %q, %v", node, ok, tc.wantNode, tc.wantOK)
			}
		})
	}
}
