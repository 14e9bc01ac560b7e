package e2e

import (
	"strings"
	"testing"
)

const marked = `labels: {app.kubernetes.io/managed-by: shadowgate, interlink.eu/pod-uid: 00000000-0000-0000-0000-000000000018}`

func shadowDeployment(ns, name, podSpecExtra string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: ` + ns + `, ` + marked + `}
spec:
  selector: {matchLabels: {app: lp}}
  template:
    metadata: {labels: {app: lp}}
    spec:
      automountServiceAccountToken: false
` + podSpecExtra + `      containers: [{name: c, image: ghcr.io/interlink-hq/interlink/ssh-tunnel:0.6.0}]
`
}

// The shipped ValidatingAdmissionPolicy, not shadowgate's code, stops a stolen ServiceAccount
// token: each write is made with that token against the real API server.
func TestShadowgatesServiceAccountIsRefusedWhatNoShadowNeeds(t *testing.T) {
	refused := map[string]string{
		"a Deployment in kube-system is refused":        shadowDeployment("kube-system", "lp-ks", ""),
		"a hostNetwork Deployment is refused":           shadowDeployment("default", "lp-hostnet", "      hostNetwork: true\n"),
		"a hostPath Deployment is refused":              shadowDeployment("default", "lp-hostpath", "      volumes: [{name: h, hostPath: {path: /}}]\n"),
		"a NodePort Service is refused":                 "apiVersion: v1\nkind: Service\nmetadata: {name: lp-np, namespace: default, " + marked + "}\nspec: {type: NodePort, ports: [{port: 80}]}\n",
		"an externalIPs Service is refused":             "apiVersion: v1\nkind: Service\nmetadata: {name: lp-ext, namespace: default, " + marked + "}\nspec: {externalIPs: [1.2.3.4], ports: [{port: 80}]}\n",
		"a coredns ConfigMap in kube-system is refused": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: coredns, namespace: kube-system, " + marked + "}\ndata: {Corefile: evil}\n",
		"an unmarked ConfigMap is refused":              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lp-unmarked, namespace: default}\ndata: {a: b}\n",
	}
	for name, manifest := range refused {
		t.Run(name, func(t *testing.T) {
			r := kubectlAs(t, cluster.cp.ShadowgateKubeconfig, manifest, "apply", "--server-side", "--field-manager=shadowgate", "-f", "-")
			if r.Err == nil || !strings.Contains(r.Stderr, "ValidatingAdmissionPolicy") {
				t.Fatalf("not refused by the least-privilege policy; kubectl printed:\n%s", r.Output())
			}
		})
	}
	t.Run("a shadow-shaped Service is admitted", func(t *testing.T) {
		r := kubectlAs(t, cluster.cp.ShadowgateKubeconfig, "apiVersion: v1\nkind: Service\nmetadata: {name: lp-ok, namespace: default, "+marked+"}\nspec: {ports: [{port: 80}]}\n", "apply", "--server-side", "--field-manager=shadowgate", "-f", "-")
		if r.Err != nil {
			t.Fatalf("refused; kubectl printed:\n%s", r.Output())
		}
	})
}
