package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// A pod on cern-vk (Reverse.AllowedDestinations at its default: the pod's own namespace) asks
// for reverse forwards to another tenant, kube-system's etcd, the API server, a kubelet, and
// the metadata services by name, by Azure's address and inside NAT64: each is refused at
// `kubectl apply` naming the entry and the node. A pod on hpc-vk forwarding to its own
// namespace is admitted, and its shadow's NetworkPolicy is stored with its rules (no CNI runs
// here, so the policy is checked as an object).
func TestReverseDestinationsAtApply(t *testing.T) {
	createNamespaces(t, "dest", "victim")
	refused := map[string]string{
		"another-tenant": "db.victim.svc:5432",
		"etcd":           "etcd.kube-system.svc:2379",
		"api-server":     "6443:kubernetes.default.svc:443",
		"kubelet":        "10250:10.0.0.5:10250",
		"metadata-name":  "8080:metadata.google.internal:80",
		"azure-wire":     "8080:168.63.129.16:80",
		"nat64-metadata": "8080:[64:ff9b::a9fe:a9fe]:80",
	}
	for name, entry := range refused {
		t.Run(name, func(t *testing.T) {
			p := offloaded{name: name, namespace: "dest", node: "cern-vk", annotations: map[string]string{fwd: entry}}
			want := expectedRefusal(t, p)
			r := kubectl(t, p.json(), "apply", "-f", "-")
			if r.Err == nil {
				t.Fatalf("admitted; kubectl printed:\n%s", r.Output())
			}
			expectContains(t, r.Stderr, append(want, `metadata.annotations[interlink.eu/reverse-forwards]: Invalid value: "`+entry+`"`)...)
		})
	}

	p := offloaded{name: "own", namespace: "dest", node: "hpc-vk", annotations: map[string]string{fwd: "minio:9000"}, ports: []int32{8888}}
	mustKubectl(t, p.json(), "apply", "-f", "-")
	var np networkingv1.NetworkPolicy
	if err := json.Unmarshal([]byte(mustKubectl(t, "", "get", "networkpolicy", "own-dest", "-n", "dest-shadow", "-o", "json")), &np); err != nil {
		t.Fatal(err)
	}
	spec := np.Spec
	if len(spec.PolicyTypes) != 2 || spec.PodSelector.MatchLabels["interlink.eu/shadow"] != "own-dest" {
		t.Errorf("policy types %v, pod selector %v", spec.PolicyTypes, spec.PodSelector.MatchLabels)
	}
	if len(spec.Ingress) != 1 || len(spec.Ingress[0].From) != 1 || spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "dest" ||
		len(spec.Ingress[0].Ports) != 1 || spec.Ingress[0].Ports[0].Port.IntValue() != 8888 {
		t.Errorf("ingress %+v, want port 8888 from namespace dest only", spec.Ingress)
	}
	var egress []string
	for _, rule := range spec.Egress {
		b, _ := json.Marshal(rule)
		egress = append(egress, string(b))
	}
	all := strings.Join(egress, "\n")
	for _, want := range []string{`"port":53`, `"port":22`, `"cidr":"0.0.0.0/0","except":["169.254.0.0/16"`, `{"to":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"dest"}}}]}`} {
		if !strings.Contains(all, want) {
			t.Errorf("egress rules lack %s:\n%s", want, all)
		}
	}
	if len(spec.Egress) != 3 {
		t.Errorf("%d egress rules, want DNS, the login node and namespace dest:\n%s", len(spec.Egress), all)
	}
}
