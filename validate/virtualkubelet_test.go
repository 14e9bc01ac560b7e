package validate_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

// The virtual kubelet's Network block, pasted as it is, means what it means to the VK: its
// choices are read trimmed and in any case, and its keys for what shadowgate does not render
// are said to be ignored rather than refused.
func TestAPolicyReadsTheVirtualKubeletsNetworkBlockAsTheVirtualKubeletDoes(t *testing.T) {
	for name, c := range map[string]struct {
		network      string
		want         []vt.Err
		wantIgnored  []string
		wantNetwork  func(policy.Network) bool
		networkWants string
	}{
		"choices are read trimmed and in any case": {
			network: "EnableTunnel: true\nShadowMode: ' SSH'\nSSH:\n  LoginHost: login.hpc.example.org\n  User: alice\n  KeySecret: k\n  Auth: PublicKey\n  ForwardMode: 'Exec '\n  Reverse: {Enabled: true, NodeExec: SRUN, Sshd: UserSpace}\n",
			wantNetwork: func(n policy.Network) bool {
				return n.ShadowMode == "ssh" && n.SSH.Auth == "publickey" && n.SSH.ForwardMode == "exec" &&
					n.SSH.Reverse.NodeExec == "srun" && n.SSH.Reverse.Sshd == "userspace"
			},
			networkWants: "ssh, publickey, exec, srun, userspace",
		},
		"the VK's keys for the wstunnel shadow and the mesh are ignored with a warning each": {
			network:     "EnableTunnel: true\nWstunnelCommand: wstunnel\nServiceCIDR: 10.96.0.0/12\nDNSServiceIP: 10.96.0.10\n",
			wantIgnored: []string{"Network.DNSServiceIP is ignored", "Network.ServiceCIDR is ignored", "Network.WstunnelCommand is ignored"},
		},
		"the VK's ingress keys are read, not ignored, and judged only for the SSH shadow": {
			network: "EnableTunnel: true\nWildcardDNS: '*.example.org'\nIngressTLS: true\nIngressClusterIssuer: lets-issuer\n",
			wantNetwork: func(n policy.Network) bool {
				return n.Domain() == "example.org" && n.IngressTLS && n.IngressClusterIssuer == "lets-issuer"
			},
			networkWants: "domain example.org, TLS from lets-issuer",
		},
		"a key the VK does not have either is still refused": {
			network: "EnableTunnel: true\nWildcardDns: example.org\n",
			want:    []vt.Err{{Type: field.ErrorTypeInvalid, Field: "virtualNodes[cern-vk].Network.WildcardDns", Value: "WildcardDns"}},
		},
		"a choice that is no choice in any case is still refused": {
			network: "ShadowMode: SSHH\n",
			want:    []vt.Err{{Type: field.ErrorTypeNotSupported, Field: "virtualNodes[cern-vk].Network.ShadowMode", Value: "sshh"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p, errs := validate.ParsePolicy([]byte(node(c.network)), validate.CredentialRules{})
			vt.Expect(t, errs, c.want)
			if len(c.want) > 0 {
				return
			}
			if c.wantNetwork != nil && !c.wantNetwork(p.VirtualNodes["cern-vk"].Network) {
				t.Errorf("read %+v, want %s", p.VirtualNodes["cern-vk"].Network, c.networkWants)
			}
			expectWarnings(t, p.Ignored, c.wantIgnored)
		})
	}
}

// The policy ConfigMap is admitted with the ignored keys as its warnings, which kubectl prints.
func TestThePolicyConfigMapWarnsOfIgnoredKeys(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: policy.ConfigMapName, Namespace: "shadowgate-system"},
		Data: map[string]string{policy.DataKey: node("EnableTunnel: true\nServiceCIDR: 10.96.0.0/12\n")}}
	d, _ := validate.Object(cm, validate.Config{PolicyRef: validate.PolicyRef{Namespace: "shadowgate-system", Name: policy.ConfigMapName}})
	if !d.Allowed() {
		t.Fatal(d.Errors)
	}
	expectWarnings(t, d.Warnings, []string{"data[policy.yaml].virtualNodes[cern-vk].Network.ServiceCIDR is ignored",
		"data[policy.yaml].virtualNodes[cern-vk]: any namespace may use virtual node cern-vk"})
}

// The reverse tunnel rides the SSH shadow, which EnableTunnel turns on: a pod asking for it on
// a node without the tunnel is refused, as the virtual kubelet refuses it. And pod-vpn turns
// the VPN on whatever its value, as for the virtual kubelet; "false" is said to do so too.
func TestPodsAreJudgedAsTheVirtualKubeletJudgesThem(t *testing.T) {
	pol := mustPolicy(t, strings.Replace(testPolicy, "  hpc-vk:\n    Network:\n      EnableTunnel: true\n", "  hpc-vk:\n    Network:\n      EnableTunnel: false\n", 1))
	_, d := validate.Pod(podOn("hpc-vk", ann(fwd, "minio:9000")), validate.Config{Policy: pol})
	vt.Expect(t, d.Errors, []vt.Err{{Type: field.ErrorTypeForbidden, Field: annPath(fwd), Value: ""}})
	if len(d.Errors) == 1 && !strings.Contains(d.Errors[0].Detail, "its EnableTunnel is false") {
		t.Errorf("the refusal does not say why: %s", d.Errors[0].Detail)
	}

	pol = mustPolicy(t, testPolicy)
	for value, wantWarning := range map[string]bool{"true": false, "false": true, "": true} {
		o, d := validate.Pod(podOn("hpc-vk", ann(validate.AnnotationPodVPN, value)), validate.Config{Policy: pol})
		if !d.Allowed() || o == nil || !o.PodVPN {
			t.Errorf("pod-vpn %q: PodVPN %v, errors %v: want the VPN on", value, o != nil && o.PodVPN, d.Errors)
		}
		if got := len(d.Warnings) == 1 && strings.Contains(d.Warnings[0], "still turns the pod VPN on"); got != wantWarning {
			t.Errorf("pod-vpn %q: warnings %q, want the warning: %v", value, d.Warnings, wantWarning)
		}
	}
}
