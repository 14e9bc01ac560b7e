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

// With one virtual node, a pod placed by its toleration alone belongs to it only if its required
// node affinity can select it: a DaemonSet's pod carries a catch-all toleration and a required
// term pinning it to its node by metadata.name.
func TestVirtualNodeForRequiredNodeAffinity(t *testing.T) {
	single := mustPolicy(t, "virtualNodes:\n  hpc-vk: {}\n")
	catchAll := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	virtualNode := []corev1.Toleration{{Key: validate.TolerationVirtualNode, Operator: corev1.TolerationOpExists}}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	fields := func(rs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchFields: rs}
	}
	exprs := func(rs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: rs}
	}
	required := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	pinnedTo := func(node string) *corev1.Affinity {
		return required(fields(req("metadata.name", corev1.NodeSelectorOpIn, node)))
	}
	hostname, zone := validate.LabelHostname, "topology.kubernetes.io/zone"
	cases := map[string]struct {
		tolerations []corev1.Toleration
		affinity    *corev1.Affinity
		nodeName    string // when set, the pod names its node: the affinity is not read
		wantOK      bool
	}{
		"a DaemonSet pod pinned to an ordinary node with a catch-all toleration belongs to none": {
			tolerations: catchAll, affinity: pinnedTo("worker-1")},
		"a DaemonSet pod pinned to the virtual node with a catch-all toleration belongs to it": {
			tolerations: catchAll, affinity: pinnedTo("hpc-vk"), wantOK: true},
		"a pod pinned to an ordinary node belongs to none even with the virtual node's toleration": {
			tolerations: virtualNode, affinity: pinnedTo("worker-1")},
		"a pod belongs when one of its terms admits the virtual node": {tolerations: catchAll, affinity: required(
			fields(req("metadata.name", corev1.NodeSelectorOpIn, "worker-1")),
			fields(req("metadata.name", corev1.NodeSelectorOpIn, "worker-2", "hpc-vk"))), wantOK: true},
		"a pod belongs to none when none of its terms admits the virtual node": {tolerations: catchAll, affinity: required(
			fields(req("metadata.name", corev1.NodeSelectorOpIn, "worker-1")),
			exprs(req(hostname, corev1.NodeSelectorOpIn, "worker-2")))},
		"one requirement excluding the virtual node excludes its whole term": {tolerations: catchAll, affinity: required(corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{req(zone, corev1.NodeSelectorOpExists)},
			MatchFields:      []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "worker-1")}})},
		"metadata.name NotIn the virtual node belongs to none": {tolerations: catchAll,
			affinity: required(fields(req("metadata.name", corev1.NodeSelectorOpNotIn, "hpc-vk")))},
		"metadata.name NotIn other nodes belongs": {tolerations: catchAll,
			affinity: required(fields(req("metadata.name", corev1.NodeSelectorOpNotIn, "worker-1"))), wantOK: true},
		"a hostname expression In the virtual node belongs": {tolerations: catchAll,
			affinity: required(exprs(req(hostname, corev1.NodeSelectorOpIn, "hpc-vk"))), wantOK: true},
		"a hostname expression NotIn the virtual node belongs to none": {tolerations: catchAll,
			affinity: required(exprs(req(hostname, corev1.NodeSelectorOpNotIn, "hpc-vk", "worker-1")))},
		"a hostname expression DoesNotExist belongs to none": {tolerations: catchAll,
			affinity: required(exprs(req(hostname, corev1.NodeSelectorOpDoesNotExist)))},
		"a hostname expression Exists belongs": {tolerations: catchAll,
			affinity: required(exprs(req(hostname, corev1.NodeSelectorOpExists))), wantOK: true},
		"a hostname expression Gt is left to the scheduler and belongs": {tolerations: catchAll,
			affinity: required(exprs(req(hostname, corev1.NodeSelectorOpGt, "3"))), wantOK: true},
		"a term only on other labels belongs, their values on the virtual node being unknown": {tolerations: catchAll, wantOK: true,
			affinity: required(exprs(req(zone, corev1.NodeSelectorOpIn, "hpc"), req("node-role.kubernetes.io/worker", corev1.NodeSelectorOpDoesNotExist)))},
		"a term without requirements selects no node, so the pod belongs to none": {tolerations: catchAll,
			affinity: required(corev1.NodeSelectorTerm{})},
		"required affinity without terms does not constrain the pod": {tolerations: catchAll, affinity: required(), wantOK: true},
		"preferred affinity alone does not constrain the pod": {tolerations: catchAll, affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1,
				Preference: fields(req("metadata.name", corev1.NodeSelectorOpIn, "worker-1"))}}}}, wantOK: true},
		"pod affinity alone does not constrain the pod": {tolerations: catchAll,
			affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}}, wantOK: true},
		"without a toleration the affinity alone does not place the pod": {affinity: pinnedTo("hpc-vk")},
		"spec.nodeName wins over an affinity pinning elsewhere": {nodeName: "hpc-vk",
			affinity: pinnedTo("worker-1"), wantOK: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := corev1.PodSpec{NodeName: tc.nodeName, Tolerations: tc.tolerations, Affinity: tc.affinity}
			node, ok := validate.VirtualNodeFor(&spec, single)
			wantNode := ""
			if tc.wantOK {
				wantNode = "hpc-vk"
			}
			if node != wantNode || ok != tc.wantOK {
				t.Errorf("VirtualNodeFor = %q, %v; want %q, %v", node, ok, wantNode, tc.wantOK)
			}
		})
	}
}
