package inject

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	pspolicy "k8s.io/pod-security-admission/policy"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

const sshNode = `
virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: %s
      ShadowMode: %s
      SSH:
        LoginHost: login.hpc.example.org
        User: alice
        KeySecret: hpc-ssh-key
`

func TestNoShadowWhenThePodNeedsNone(t *testing.T) {
	tcp := corev1.ContainerPort{ContainerPort: 8888}
	udp := corev1.ContainerPort{ContainerPort: 5353, Protocol: corev1.ProtocolUDP}
	for sentence, tc := range map[string]struct {
		enableTunnel, shadowMode string
		annotations              map[string]string
		ports                    []corev1.ContainerPort
	}{
		"the node's shadow is wstunnel":                 {"true", "wstunnel", nil, []corev1.ContainerPort{tcp}},
		"EnableTunnel is false and no reverse forwards": {"false", "ssh", nil, []corev1.ContainerPort{tcp}},
		"the pod asks for pod-vpn":                      {"true", "ssh", map[string]string{validate.AnnotationPodVPN: "true"}, []corev1.ContainerPort{tcp}},
		"the pod exposes UDP only":                      {"true", "ssh", nil, []corev1.ContainerPort{udp}},
		"the pod exposes no port":                       {"true", "ssh", nil, nil},
		"UDP extra ports only":                          {"true", "ssh", map[string]string{validate.AnnotationExtraPorts: "5353:dns:UDP"}, nil},
	} {
		t.Run(sentence, func(t *testing.T) {
			pod := offloadedPod("notebook", "user", tc.ports...)
			pod.Annotations = tc.annotations
			if s, _ := render(t, fmt.Sprintf(sshNode, tc.enableTunnel, tc.shadowMode), pod); s != nil {
				t.Errorf("got a shadow: %+v", s.Objects())
			}
		})
	}
	t.Run("a pod on no listed virtual node", func(t *testing.T) {
		if s, _ := buildShadow(offloadedPod("notebook", "user", tcp), nil); s != nil {
			t.Errorf("got a shadow")
		}
	})
}

func TestObjectsComeInApplyOrder(t *testing.T) {
	for sentence, tc := range map[string]struct {
		annotations map[string]string
		want        []string
	}{
		"a shadow in <ns>-shadow starts with its Namespace": {nil, []string{"Namespace", "ConfigMap", "Service", "NetworkPolicy", "Deployment"}},
		"a shadow beside its pod applies no Namespace":      {map[string]string{validate.AnnotationShadowSameNS: "true"}, []string{"ConfigMap", "Service", "NetworkPolicy", "Deployment"}},
	} {
		t.Run(sentence, func(t *testing.T) {
			pod := offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: 8888})
			pod.Annotations = tc.annotations
			s, _ := render(t, fmt.Sprintf(sshNode, "true", "ssh"), pod)
			var kinds []string
			for _, obj := range s.Objects() {
				kinds = append(kinds, obj.GetObjectKind().GroupVersionKind().Kind)
				if obj.GetObjectKind().GroupVersionKind().Version != "v1" {
					t.Errorf("%T has no apiVersion v1", obj)
				}
			}
			if !slices.Equal(kinds, tc.want) {
				t.Errorf("apply order %v, want %v", kinds, tc.want)
			}
		})
	}
}

// A shadow copies exactly the credentials it uses: what its Deployment mounts from the policy
// and the TLS Secret its front door's Ingress names, marked as the front door's certificate.
func TestCredentialsToReplicate(t *testing.T) {
	for _, c := range shadowCases(t) {
		t.Run(c.name, func(t *testing.T) {
			s, _ := c.shadowOf(t)
			ssh := c.policy.VirtualNodes["hpc-vk"].Network.SSH
			var want []Credential
			if ssh.ReplicateCredentials {
				// Exactly what the Deployment mounts from the policy, nothing it does not:
				// not the node ConfigMap nor the scripts ConfigMap, which are shadowgate's own.
				for _, v := range s.Deployment.Spec.Template.Spec.Volumes {
					switch {
					case v.Secret != nil:
						want = append(want, Credential{Kind: "Secret", Name: v.Secret.SecretName, Namespace: s.Deployment.Namespace})
					case v.ConfigMap != nil && v.Name != volumeNode && v.Name != volumeScripts:
						want = append(want, Credential{Kind: "ConfigMap", Name: v.ConfigMap.Name, Namespace: s.Deployment.Namespace})
					}
				}
				// And the front door's wildcard certificate, which its Ingress names and no
				// shadow pod mounts.
				if s.Ingress != nil && c.policy.VirtualNodes["hpc-vk"].Network.FrontDoor.TLSSecret != "" {
					want = append(want, Credential{Kind: "Secret", Name: s.Ingress.Spec.TLS[0].SecretName, Namespace: s.Ingress.Namespace, TLS: true})
				}
			}
			if got := s.Credentials(); !slices.Equal(got, want) {
				t.Errorf("Credentials() = %v, want %v", got, want)
			}
		})
	}
}

func TestShadowPodMeetsTheRestrictedPodSecurityStandard(t *testing.T) {
	evaluator, err := pspolicy.NewEvaluator(pspolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	for _, c := range shadowCases(t) {
		t.Run(c.name, func(t *testing.T) {
			s, _ := c.shadowOf(t)
			tmpl := s.Deployment.Spec.Template
			for _, r := range evaluator.EvaluatePod(restricted, &tmpl.ObjectMeta, &tmpl.Spec) {
				if !r.Allowed {
					t.Errorf("restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
				}
			}
			for _, ctr := range append(tmpl.Spec.InitContainers, tmpl.Spec.Containers...) {
				if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() {
					t.Errorf("container %s has no CPU and memory requests", ctr.Name)
				}
			}
		})
	}
}

func TestContainersPerAuthAndMode(t *testing.T) {
	for _, c := range shadowCases(t) {
		t.Run(c.name, func(t *testing.T) {
			s, _ := c.shadowOf(t)
			ssh := c.policy.VirtualNodes["hpc-vk"].Network.SSH
			spec := s.Deployment.Spec.Template.Spec
			wantInit, want := []string{containerWaitForNode}, []string(nil)
			if ssh.NodeDiscovery == policy.NodeDiscoverySlurm {
				// Slurm's reason for a queued job reaches Events through the sidecar's probe.
				wantInit = []string{containerWaitReason, containerWaitForNode}
			}
			if s.Service != nil {
				want = append(want, containerForward)
			}
			if ssh.Auth == policy.AuthKerberos {
				// Asking Slurm for the node is a login, which needs the ticket first; reading
				// the node ConfigMap is not.
				if ssh.NodeDiscovery == policy.NodeDiscoverySlurm {
					wantInit = []string{containerKinit, containerWaitReason, containerWaitForNode}
				} else {
					wantInit = append(wantInit, containerKinit)
				}
				want = append(want, containerKrbRefresh)
			}
			if _, reverse := c.pod.Annotations[validate.AnnotationReverseForwards]; reverse {
				want = append(want, ContainerReverse)
			}
			if got := names(spec.InitContainers); !slices.Equal(got, wantInit) {
				t.Errorf("init containers %v, want %v", got, wantInit)
			}
			if got := names(spec.Containers); !slices.Equal(got, want) {
				t.Errorf("containers %v, want %v", got, want)
			}
			// Every ssh container logs in the same way; ssh-forward, or ssh-reverse alone, stands
			// for them all.
			ssh1 := containerForward
			if s.Service == nil {
				ssh1 = ContainerReverse
			}
			first := container(t, s.Deployment, ssh1)
			opts := envValue(first, envSSHOptions)
			wantHostKey := "StrictHostKeyChecking=accept-new"
			if ssh.KnownHostsConfigMap != "" {
				wantHostKey = "StrictHostKeyChecking=yes"
			}
			if !slices.Contains(splitLines(opts), wantHostKey) {
				t.Errorf("ssh options lack %s:\n%s", wantHostKey, opts)
			}
			if got := envValue(first, EnvForwardMode); got != ssh.ForwardMode {
				t.Errorf("forward mode %q, want %q", got, ssh.ForwardMode)
			}
		})
	}
}

// ExtraOptions come after the options the policy's own fields state, which the policy refuses
// among them anyway, and before the keepalive and timeout defaults, which they override.
func TestExtraOptionsOverrideTheDefaultsAlone(t *testing.T) {
	pol := `
virtualNodes:
  hpc-vk:
    Network:
      EnableTunnel: true
      ShadowMode: ssh
      SSH:
        LoginHost: login.hpc.example.org
        User: alice
        KeySecret: hpc-ssh-key
        KnownHostsConfigMap: hpc-known-hosts
        ExtraOptions: [ServerAliveInterval=5, ConnectTimeout=10]
`
	s, _ := render(t, pol, offloadedPod("notebook", "user", corev1.ContainerPort{ContainerPort: 8888}))
	opts := splitLines(envValue(container(t, s.Deployment, containerForward), envSSHOptions))
	// ssh keeps the first value of an option.
	for _, tc := range []struct{ key, want string }{
		{"StrictHostKeyChecking", "StrictHostKeyChecking=yes"},
		{"User", "User=alice"},
		{"ServerAliveInterval", "ServerAliveInterval=5"},
		{"ConnectTimeout", "ConnectTimeout=10"},
	} {
		if got := firstOption(opts, tc.key); got != tc.want {
			t.Errorf("ssh takes %s, want %s", got, tc.want)
		}
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func splitLines(s string) []string { return strings.Split(s, "\n") }

func firstOption(opts []string, key string) string {
	for _, o := range opts {
		if strings.HasPrefix(o, key+"=") {
			return o
		}
	}
	return ""
}
