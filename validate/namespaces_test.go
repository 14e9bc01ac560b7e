package validate_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

// boundNode renders a one-node policy (node hpc-vk, a wstunnel node) with binding lines beside
// its Network block.
func boundNode(binding string) string {
	return "virtualNodes:\n  hpc-vk:\n    Network:\n      EnableTunnel: true\n" + indent(binding, 4)
}

var hpcVK = field.NewPath("virtualNodes").Key("hpc-vk")

func TestNamespaceBindingRules(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want []vt.Err
	}{
		"a list of namespaces is valid":   {doc: boundNode("AllowedNamespaces: [team-a, team-b]\n")},
		"an empty list binds no one":      {doc: boundNode("AllowedNamespaces: []\n")},
		"a matchLabels selector is valid": {doc: boundNode("AllowedNamespaceSelector:\n  matchLabels:\n    hpc.example.org/tenant: physics\n")},
		"a matchExpressions selector is valid": {doc: boundNode(
			"AllowedNamespaceSelector:\n  matchExpressions:\n  - {key: tenant, operator: In, values: [physics, chemistry]}\n")},
		"a list and a selector together are valid": {doc: boundNode("AllowedNamespaces: [team-a]\nAllowedNamespaceSelector:\n  matchLabels: {tenant: physics}\n")},
		"a namespace name that is not a DNS-1123 label is refused": {doc: boundNode("AllowedNamespaces: [Team_A, ok]\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: hpcVK.Child("AllowedNamespaces").Index(0).String(), Value: "Team_A"}}},
		"a namespace listed twice is refused": {doc: boundNode("AllowedNamespaces: [team-a, team-a]\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: hpcVK.Child("AllowedNamespaces").Index(1).String(), Value: "team-a"}}},
		"an empty selector, which matches every namespace, is refused": {doc: boundNode("AllowedNamespaceSelector: {}\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: hpcVK.Child("AllowedNamespaceSelector").String(), Value: "{}"}}},
		"every problem of the list and the selector is reported at once": {doc: boundNode(
			"AllowedNamespaces: [\"-bad\"]\nAllowedNamespaceSelector:\n  matchLabels: {\"bad key!\": x}\n  matchExpressions:\n  - {key: tenant, operator: Near}\n"),
			want: []vt.Err{
				{Type: field.ErrorTypeInvalid, Field: hpcVK.Child("AllowedNamespaces").Index(0).String(), Value: "-bad"},
				{Type: field.ErrorTypeInvalid, Field: hpcVK.Child("AllowedNamespaceSelector", "matchLabels").String(), Value: "bad key!"},
				{Type: field.ErrorTypeInvalid, Field: hpcVK.Child("AllowedNamespaceSelector", "matchExpressions").Index(0).Child("operator").String(), Value: metav1.LabelSelectorOperator("Near")},
			}},
		"a misspelt selector key is refused by the strict decoder": {doc: boundNode("AllowedNamespaceSelector:\n  matchLabel: {tenant: physics}\n"),
			want: []vt.Err{
				{Type: field.ErrorTypeInvalid, Field: hpcVK.Child("AllowedNamespaceSelector", "matchLabel").String(), Value: "matchLabel"},
				{Type: field.ErrorTypeInvalid, Field: hpcVK.Child("AllowedNamespaceSelector").String(), Value: "{}"},
			}},
		"a list that is not a list is refused": {doc: boundNode("AllowedNamespaces: team-a\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: hpcVK.Child("AllowedNamespaces").String(), Value: "team-a"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := validate.ParsePolicy([]byte(tc.doc), validate.CredentialRules{})
			vt.Expect(t, errs, tc.want)
		})
	}
}

func TestPolicyWarnsOfUnboundNodes(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want string // a substring of the one warning; empty: no warning
	}{
		"an unbound SSH node is named with its site account": {doc: sshNode(""),
			want: "virtualNodes[cern-vk]: any namespace may use virtual node cern-vk, and every pod on it runs its job as its one site account (User: alice)"},
		"an unbound wstunnel node is named too": {doc: boundNode(""), want: "any namespace may use virtual node hpc-vk"},
		"a node bound by a list is not":         {doc: boundNode("AllowedNamespaces: [team-a]\n")},
		"a node bound by a selector is not":     {doc: boundNode("AllowedNamespaceSelector:\n  matchLabels: {tenant: physics}\n")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			warnings := validate.PolicyWarnings(mustPolicy(t, tc.doc), nil)
			switch {
			case tc.want == "" && len(warnings) > 0:
				t.Errorf("warnings = %q; want none", warnings)
			case tc.want != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.want)):
				t.Errorf("warnings = %q; want one containing %q", warnings, tc.want)
			}
		})
	}
}

func TestNamespaceBindingDecision(t *testing.T) {
	list := "AllowedNamespaces: [team-a]\n"
	selector := "AllowedNamespaceSelector:\n  matchLabels: {tenant: physics}\n"
	tolerates := []corev1.Toleration{{Key: validate.TolerationVirtualNode, Operator: corev1.TolerationOpExists}}
	cases := map[string]struct {
		binding   string
		namespace string
		labels    map[string]string
		spec      corev1.PodSpec
		wantField string // empty: admitted
		wantIn    []string
	}{
		"an unbound node admits any namespace": {namespace: "anyone"},
		"a listed namespace is admitted":       {binding: list, namespace: "team-a"},
		"a namespace not listed is refused at spec.nodeName, naming node, namespace, rule and remedy": {binding: list, namespace: "team-b",
			wantField: "spec.nodeName", wantIn: []string{"namespace team-b may not use virtual node hpc-vk", "AllowedNamespaces [team-a]", "add team-b to virtualNodes[hpc-vk].AllowedNamespaces"}},
		"a namespace whose labels match the selector is admitted": {binding: selector, namespace: "physics-1", labels: map[string]string{"tenant": "physics"}},
		"a namespace whose labels do not match is refused, naming the selector": {binding: selector, namespace: "chem", labels: map[string]string{"tenant": "chemistry"},
			wantField: "spec.nodeName", wantIn: []string{`AllowedNamespaceSelector "tenant=physics"`, "label namespace chem to match it"}},
		"a namespace of unknown labels does not match": {binding: selector, namespace: "physics-1",
			wantField: "spec.nodeName"},
		"the name label matches without the labels being known": {binding: "AllowedNamespaceSelector:\n  matchLabels: {kubernetes.io/metadata.name: lab}\n", namespace: "lab"},
		"a namespace cannot claim another's name by its labels": {binding: "AllowedNamespaceSelector:\n  matchLabels: {kubernetes.io/metadata.name: lab}\n",
			namespace: "intruder", labels: map[string]string{corev1.LabelMetadataName: "lab"}, wantField: "spec.nodeName"},
		"either rule admits: listed though its labels do not match": {binding: list + selector, namespace: "team-a", labels: map[string]string{"tenant": "none"}},
		"either rule admits: labelled though not listed":            {binding: list + selector, namespace: "p", labels: map[string]string{"tenant": "physics"}},
		"a pod matching neither rule is told of both": {binding: list + selector, namespace: "x",
			wantField: "spec.nodeName", wantIn: []string{"AllowedNamespaces [team-a] or the namespaces whose labels match", "add x to virtualNodes[hpc-vk].AllowedNamespaces or to label namespace x"}},
		"a pod placed by the hostname node selector is refused there": {binding: list, namespace: "team-b",
			spec:      corev1.PodSpec{NodeSelector: map[string]string{validate.LabelHostname: "hpc-vk"}},
			wantField: "spec.nodeSelector[kubernetes.io/hostname]"},
		"a pod placed by its toleration on the only node is refused there": {binding: list, namespace: "team-b",
			spec: corev1.PodSpec{Tolerations: tolerates}, wantField: "spec.tolerations"},
		"an empty list refuses every namespace": {binding: "AllowedNamespaces: []\n", namespace: "team-a", wantField: "spec.nodeName"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pol := mustPolicy(t, boundNode(tc.binding))
			spec := tc.spec
			if spec.NodeSelector == nil && spec.Tolerations == nil {
				spec.NodeName = "hpc-vk"
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: tc.namespace}, Spec: spec}
			_, d := validate.Pod(pod, validate.Config{Policy: pol, NamespaceLabels: tc.labels})
			if tc.wantField == "" {
				if !d.Allowed() {
					t.Fatalf("refused: %v", d.Errors)
				}
				return
			}
			if len(d.Errors) != 1 || d.Errors[0].Field != tc.wantField || d.Errors[0].Type != field.ErrorTypeForbidden {
				t.Fatalf("errors = %v; want one Forbidden at %s", d.Errors, tc.wantField)
			}
			for _, s := range tc.wantIn {
				if !strings.Contains(d.Errors[0].Detail, s) {
					t.Errorf("detail %q does not say %q", d.Errors[0].Detail, s)
				}
			}
		})
	}
}
