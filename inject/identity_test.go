package inject

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The shadow pod is the workload's stand-in in the cluster: it carries the offloaded pod's own
// labels and annotations, as the virtual kubelet's shadow does, so NetworkPolicies and mesh
// policies written for the workload select it, less what the VK leaves out and what would break
// the shadow; shadowgate's own labels win over the pod's.
func TestShadowPodCarriesThePodsLabelsAndAnnotations(t *testing.T) {
	pod := offloadedPod("web", "user", corev1.ContainerPort{ContainerPort: 8080})
	pod.Labels = map[string]string{
		"app":                         "web",
		"version":                     "v2",
		"sidecar.istio.io/inject":     "true",
		labelComponent:                "frontend",
		LabelManagedBy:                "Helm",
		labelShadow:                   "someone-else",
		LabelPodUID:                   "not-this-pod",
		"app.kubernetes.io/part-of":   "shop",
		"statefulset.kubernetes.io/x": "y",
	}
	pod.Annotations = map[string]string{
		"prometheus.io/scrape":                                "true",
		"proxy.istio.io/config":                               "{}",
		"linkerd.io/inject":                                   "enabled",
		"slurm-job.vk.io/flags":                               "-p gpu",
		"slurm-job.vk.io/pre-exec":                            "module load cuda",
		"sidecar.istio.io/status":                             `{"containers":["istio-proxy"]}`,
		"sidecar.istio.io/rewriteAppHTTPProbers":              "true",
		"interlink.eu/wstunnel-extra-ports":                   "9000",
		"interlink.eu/shadow-for":                             "someone/else",
		"container.apparmor.security.beta.kubernetes.io/main": "runtime/default",
		"container.seccomp.security.alpha.kubernetes.io/main": "runtime/default",
		"seccomp.security.alpha.kubernetes.io/pod":            "runtime/default",
		"kubectl.kubernetes.io/last-applied-configuration":    `{"kind":"Pod"}`,
	}
	s, _ := render(t, fmt.Sprintf(sshNode, "true", "ssh"), pod)
	name := "web-user"
	template := s.Deployment.Spec.Template

	wantLabels := map[string]string{
		"app":                         "web",
		"version":                     "v2",
		"sidecar.istio.io/inject":     "true",
		"app.kubernetes.io/part-of":   "shop",
		"statefulset.kubernetes.io/x": "y",
		labelComponent:                name, // the VK finds the shadow pod by it
		LabelManagedBy:                ManagedBy,
		labelShadow:                   name,
		LabelPodUID:                   string(pod.UID),
	}
	if !maps.Equal(template.Labels, wantLabels) {
		t.Errorf("shadow pod labels\n%v\nwant\n%v", template.Labels, wantLabels)
	}
	wantAnnotations := map[string]string{
		"prometheus.io/scrape":  "true",
		"proxy.istio.io/config": "{}",
		"linkerd.io/inject":     "enabled",
		AnnotationShadowFor:     "user/web",
	}
	if !maps.Equal(template.Annotations, wantAnnotations) {
		t.Errorf("shadow pod annotations\n%v\nwant\n%v", template.Annotations, wantAnnotations)
	}
	// The pod's labels select its shadow pod, never the shadow's own objects: the Deployment
	// and the Service select by the shadow alone.
	if sel := s.Deployment.Spec.Selector.MatchLabels; !maps.Equal(sel, map[string]string{labelShadow: name}) {
		t.Errorf("Deployment selector %v", sel)
	}
	if sel := s.Service.Spec.Selector; !maps.Equal(sel, map[string]string{labelShadow: name}) {
		t.Errorf("Service selector %v", sel)
	}
	for _, meta := range []map[string]string{s.Deployment.Labels, s.Service.Labels, s.NodeConfigMap.Labels} {
		if _, ok := meta["app"]; ok {
			t.Errorf("a shadow object, not only its pod, carries the pod's labels: %v", meta)
		}
	}
	if pod.Labels[labelComponent] != "frontend" || pod.Annotations["slurm-job.vk.io/flags"] != "-p gpu" {
		t.Errorf("the offloaded pod was changed: %v %v", pod.Labels, pod.Annotations)
	}
}

func TestShadowPodOfAPodWithoutLabelsOrAnnotations(t *testing.T) {
	s, _ := render(t, fmt.Sprintf(sshNode, "true", "ssh"), offloadedPod("web", "user", corev1.ContainerPort{ContainerPort: 8080}))
	template := s.Deployment.Spec.Template
	want := map[string]string{labelComponent: "web-user", LabelManagedBy: ManagedBy, labelShadow: "web-user", LabelPodUID: "0b5e3c2a-5d1f-4c1e-9a47-6f0d3f1b2c3d"}
	if !maps.Equal(template.Labels, want) {
		t.Errorf("labels %v, want %v", template.Labels, want)
	}
	if !maps.Equal(template.Annotations, map[string]string{AnnotationShadowFor: "user/web"}) {
		t.Errorf("annotations %v", template.Annotations)
	}
}

// Off the virtual node: the shadow pod asks for an ordinary Linux node, as the VK's does.
func TestShadowPodRunsOnALinuxNode(t *testing.T) {
	s, _ := render(t, fmt.Sprintf(sshNode, "true", "ssh"), offloadedPod("web", "user", corev1.ContainerPort{ContainerPort: 8080}))
	if got := s.Deployment.Spec.Template.Spec.NodeSelector; !maps.Equal(got, map[string]string{"kubernetes.io/os": "linux"}) {
		t.Errorf("nodeSelector %v, want kubernetes.io/os: linux", got)
	}
}

// servicePorts is name=port of each Service port, in order.
func servicePorts(s *Shadow) []string {
	if s == nil || s.Service == nil {
		return nil
	}
	var ports []string
	for _, p := range s.Service.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s=%d", p.Name, p.Port))
	}
	return ports
}

func TestForwardedPortsAndTheirNames(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	tcp := func(name string, port int32) corev1.ContainerPort {
		return corev1.ContainerPort{Name: name, ContainerPort: port}
	}
	for sentence, tc := range map[string]struct {
		containers, initContainers []corev1.Container
		extra                      string
		want                       []string // Service ports, name=port
		warning                    string   // in one of the warnings
	}{
		"an unnamed port is named port-<number>, as the VK names it": {
			containers: []corev1.Container{{Name: "main", Ports: []corev1.ContainerPort{tcp("", 8080), tcp("http", 80)}}},
			want:       []string{"port-8080=8080", "http=80"},
		},
		"an unnamed extra port too": {
			containers: []corev1.Container{{Name: "main", Ports: []corev1.ContainerPort{tcp("http", 80)}}},
			extra:      "9000,9100:metrics",
			want:       []string{"http=80", "port-9000=9000", "metrics=9100"},
		},
		"a pod's own port-<number> on another port makes the generated name unique": {
			containers: []corev1.Container{{Name: "main", Ports: []corev1.ContainerPort{tcp("port-8080", 9000), tcp("", 8080)}}},
			want:       []string{"port-8080=9000", "port-8080-2=8080"},
		},
		"a native sidecar's ports are forwarded after the containers'": {
			containers:     []corev1.Container{{Name: "main", Ports: []corev1.ContainerPort{tcp("http", 80)}}},
			initContainers: []corev1.Container{{Name: "proxy", RestartPolicy: always, Ports: []corev1.ContainerPort{tcp("", 15001), tcp("admin", 15000)}}},
			want:           []string{"http=80", "port-15001=15001", "admin=15000"},
		},
		"a pod whose only port is a native sidecar's gets a shadow": {
			containers:     []corev1.Container{{Name: "main"}},
			initContainers: []corev1.Container{{Name: "metrics", RestartPolicy: always, Ports: []corev1.ContainerPort{tcp("metrics", 9090)}}},
			want:           []string{"metrics=9090"},
		},
		"an ordinary init container's ports are not: it has exited before anything could connect": {
			containers:     []corev1.Container{{Name: "main", Ports: []corev1.ContainerPort{tcp("http", 80)}}},
			initContainers: []corev1.Container{{Name: "setup", Ports: []corev1.ContainerPort{tcp("setup", 7000)}}},
			want:           []string{"http=80"},
		},
		"a native sidecar's UDP port is skipped with a warning": {
			containers: []corev1.Container{{Name: "main", Ports: []corev1.ContainerPort{tcp("http", 80)}}},
			initContainers: []corev1.Container{{Name: "dns", RestartPolicy: always, Ports: []corev1.ContainerPort{
				{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}},
			want:    []string{"http=80"},
			warning: `spec.initContainers[0].ports[0]: sidecar "dns" port 53/UDP is skipped: the SSH shadow carries TCP only`,
		},
		"a sidecar port a container already has is forwarded once": {
			containers:     []corev1.Container{{Name: "main", Ports: []corev1.ContainerPort{tcp("http", 80)}}},
			initContainers: []corev1.Container{{Name: "proxy", RestartPolicy: always, Ports: []corev1.ContainerPort{tcp("", 80)}}},
			want:           []string{"http=80"},
			warning:        "spec.initContainers[0].ports[0]: port 80 is also spec.containers[0].ports[0]",
		},
	} {
		t.Run(sentence, func(t *testing.T) {
			pod := offloadedPod("web", "user")
			pod.Spec.Containers = tc.containers
			pod.Spec.InitContainers = tc.initContainers
			if tc.extra != "" {
				pod.Annotations = map[string]string{"interlink.eu/wstunnel-extra-ports": tc.extra}
			}
			s, warnings := render(t, fmt.Sprintf(sshNode, "true", "ssh"), pod)
			if got := servicePorts(s); !slices.Equal(got, tc.want) {
				t.Errorf("Service ports %v, want %v", got, tc.want)
			}
			if s != nil {
				var forwarded []string
				for _, p := range container(t, s.Deployment, containerForward).Ports {
					forwarded = append(forwarded, fmt.Sprintf("%s=%d", p.Name, p.ContainerPort))
				}
				if !slices.Equal(forwarded, tc.want) {
					t.Errorf("ssh-forward ports %v, want the Service's %v", forwarded, tc.want)
				}
			}
			if tc.warning != "" && !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, tc.warning) }) {
				t.Errorf("warnings %q lack %q", warnings, tc.warning)
			}
		})
	}
}
