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

func nodeConfigMap(node string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shadow-notebook-user-node", Namespace: "user",
			Labels: map[string]string{validate.LabelShadowRole: validate.ShadowRoleNode}},
		Data: map[string]string{validate.ComputeNodeKey: node},
	}
}

// binaryNodeConfigMap holds its compute node in binaryData, as no writer should.
func binaryNodeConfigMap(node string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shadow-notebook-user-node", Namespace: "user"},
		BinaryData: map[string][]byte{validate.ComputeNodeKey: []byte(node)},
	}
}

func TestNodeConfigMap(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	ref := validate.PolicyRef{Namespace: "shadowgate-system", Name: "shadowgate-policy"}
	computeNode := field.NewPath("data").Key(validate.ComputeNodeKey).String()
	binaryComputeNode := field.NewPath("binaryData").Key(validate.ComputeNodeKey).String()
	cases := map[string]struct {
		node string
		cm   *corev1.ConfigMap // when set, judged instead of a node ConfigMap holding node
		want []vt.Err
	}{
		"an empty compute node means the job is not placed yet": {node: ""},
		"a fully qualified hostname is admitted":                {node: "node07.hpc.example.org"},
		"an upper-case hostname is admitted":                    {node: "Node07.HPC.example.org"},
		"an IPv4 literal is admitted":                           {node: "10.1.2.3"},
		"an IPv6 literal is admitted":                           {node: "fd00::7"},
		"a name smuggling an ssh option is refused": {node: "node07 -oProxyCommand=x",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: "node07 -oProxyCommand=x"}}},
		"a name breaking out of the relay command is refused": {node: "node07$(id)",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: "node07$(id)"}}},
		"a name starting with a dash is refused": {node: "-oProxyCommand=x",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: "-oProxyCommand=x"}}},
		"a name with a newline is refused": {node: "node07\nnode08",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: "node07\nnode08"}}},
		"the login node's loopback is refused": {node: "127.0.0.1",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: "127.0.0.1"}}},
		"IPv4-mapped loopback is refused": {node: "::ffff:127.0.0.1",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: "::ffff:127.0.0.1"}}},
		"the cloud metadata address is refused": {node: "169.254.169.254",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: "169.254.169.254"}}},
		"a numeric shorthand of loopback is refused": {node: "0x7f.1",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: "0x7f.1"}}},
		"five numbers are refused": {node: "1.2.3.4.5",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: "1.2.3.4.5"}}},
		"a label of 200 characters is refused": {node: strings.Repeat("a", 200),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: computeNode, Value: strings.Repeat("a", 200)}}},
		"a megabyte is refused as too long, without being echoed": {node: strings.Repeat("a", 1<<20),
			want: []vt.Err{{Type: field.ErrorTypeTooLong, Field: computeNode, Value: "<value omitted>"}}},
		"a compute node in binaryData is refused, even without the label and valid": {cm: binaryNodeConfigMap("node07.hpc.example.org"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: binaryComputeNode, Value: "node07.hpc.example.org"}}},
		"an empty compute node in binaryData is refused": {cm: binaryNodeConfigMap(""),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: binaryComputeNode, Value: ""}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cm := tc.cm
			if cm == nil {
				cm = nodeConfigMap(tc.node)
			}
			d, judged := validate.Object(cm, validate.Config{Policy: pol, PolicyRef: ref, Credentials: validate.CredentialRules{}})
			if !judged {
				t.Fatal("not judged")
			}
			vt.Expect(t, d.Errors, tc.want)
		})
	}
	t.Run("a ConfigMap with a compute-node key is judged without the label", func(t *testing.T) {
		cm := nodeConfigMap("bad name")
		cm.Labels = nil
		d, _ := validate.Object(cm, validate.Config{Policy: pol, PolicyRef: ref, Credentials: validate.CredentialRules{}})
		if d.Allowed() {
			t.Error("admitted")
		}
	})
	t.Run("an unrelated ConfigMap is admitted", func(t *testing.T) {
		d, _ := validate.Object(&corev1.ConfigMap{Data: map[string]string{"x": "bad name"}}, validate.Config{Policy: pol, PolicyRef: ref, Credentials: validate.CredentialRules{}})
		vt.Expect(t, d.Errors, nil)
	})
}

func TestPolicyConfigMap(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	ref := validate.PolicyRef{Namespace: "shadowgate-system", Name: "shadowgate-policy"}
	cm := func(ns, doc string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shadowgate-policy", Namespace: ns}, Data: map[string]string{"policy.yaml": doc}}
	}
	d, _ := validate.Object(cm("shadowgate-system", "virtualNodes:\n  hpc-vk:\n    Network: {ShadowMode: ssh, SSH: {User: alice, KeySecret: k}}\n"), validate.Config{Policy: pol, PolicyRef: ref, Credentials: validate.CredentialRules{}})
	vt.Expect(t, d.Errors, []vt.Err{{Type: field.ErrorTypeRequired, Field: "data[policy.yaml].virtualNodes[hpc-vk].Network.SSH.LoginHost", Value: ""}})

	d, _ = validate.Object(cm("shadowgate-system", testPolicy), validate.Config{Policy: pol, PolicyRef: ref, Credentials: validate.CredentialRules{}})
	vt.Expect(t, d.Errors, nil)

	d, _ = validate.Object(cm("elsewhere", "not a policy"), validate.Config{Policy: pol, PolicyRef: ref, Credentials: validate.CredentialRules{}})
	vt.Expect(t, d.Errors, nil)
}
