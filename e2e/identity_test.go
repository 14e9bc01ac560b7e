package e2e

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The real API server takes the shadow of a pod with the labels, annotations and sidecar the
// virtual kubelet's shadow carries over, under the VK's names: the Deployment web-ident in
// ident-shadow, its pod labelled app.kubernetes.io/component: web-ident and with the pod's own
// labels and annotations, but not the AppArmor annotation of a container the shadow lacks
// (which the API server would refuse in a pod template), nor slurm-job.vk.io/*, nor Istio's
// injection status; the Service's ports named port-<number> where the pod left them unnamed,
// the native sidecar's among them; the shadow pod on a Linux node.
func TestShadowPodCarriesTheWorkloadsIdentity(t *testing.T) {
	createNamespaces(t, "ident")
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ident",
	  "labels":{"app":"web","app.kubernetes.io/component":"frontend"},
	  "annotations":{"prometheus.io/scrape":"true","slurm-job.vk.io/flags":"-p gpu",
	    "sidecar.istio.io/status":"{}","container.apparmor.security.beta.kubernetes.io/web":"runtime/default"}},
	  "spec":{"nodeSelector":{"kubernetes.io/hostname":"hpc-vk"},
	    "tolerations":[{"key":"virtual-node.interlink/no-schedule","operator":"Exists","effect":"NoSchedule"}],
	    "initContainers":[{"name":"envoy","image":"envoy","restartPolicy":"Always","ports":[{"containerPort":15001}]},
	      {"name":"migrate","image":"migrate","ports":[{"containerPort":7000}]}],
	    "containers":[{"name":"web","image":"web","ports":[{"containerPort":8080}]}]}}`
	expectContains(t, mustKubectl(t, pod, "apply", "-f", "-"), "pod/web created")

	var d appsv1.Deployment
	if err := json.Unmarshal([]byte(mustKubectl(t, "", "get", "deployment", "web-ident", "-n", "ident-shadow", "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	template := d.Spec.Template
	for k, v := range map[string]string{"app": "web", "app.kubernetes.io/component": "web-ident", "interlink.eu/shadow": "web-ident"} {
		if template.Labels[k] != v {
			t.Errorf("shadow pod label %s=%q, want %q (all: %v)", k, template.Labels[k], v, template.Labels)
		}
	}
	want := map[string]string{"prometheus.io/scrape": "true", "interlink.eu/shadow-for": "ident/web"}
	if !maps.Equal(template.Annotations, want) {
		t.Errorf("shadow pod annotations %v, want %v", template.Annotations, want)
	}
	if got := template.Spec.NodeSelector; !maps.Equal(got, map[string]string{"kubernetes.io/os": "linux"}) {
		t.Errorf("shadow pod nodeSelector %v", got)
	}

	var svc corev1.Service
	if err := json.Unmarshal([]byte(mustKubectl(t, "", "get", "service", "web-ident", "-n", "ident-shadow", "-o", "json")), &svc); err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name)
	}
	if want := []string{"port-8080", "port-15001"}; !slices.Equal(ports, want) {
		t.Errorf("Service ports %v, want %v", ports, want)
	}
	if ok, out := exists(t, "configmap", "web-ident-node", "-n", "ident-shadow"); !ok {
		t.Errorf("no node ConfigMap web-ident-node, where the virtual kubelet writes the compute node: %s", out)
	}
}
