package e2e

import (
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

const marked = `labels: {app.kubernetes.io/managed-by: shadowgate, interlink.eu/pod-uid: 00000000-0000-0000-0000-000000000018}`

// shadowImage is the default shadow image (validate/policy/types.go DefaultImage), which the
// policy's default image prefixes allow.
const shadowImage = policy.DefaultImage

func shadowDeployment(ns, name, podSpecExtra string) string {
	return shadowDeploymentRunning(ns, name, podSpecExtra, "[{name: c, image: "+shadowImage+"}]")
}

// shadowDeploymentRunning is shadowDeployment with its containers written out.
func shadowDeploymentRunning(ns, name, podSpecExtra, containers string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: ` + ns + `, ` + marked + `}
spec:
  selector: {matchLabels: {app: lp}}
  template:
    metadata: {labels: {app: lp}}
    spec:
      automountServiceAccountToken: false
` + podSpecExtra + `      containers: ` + containers + `
`
}

// restricted is a shadow container's securityContext (inject/containers.go).
const restricted = `securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}`

// The shipped ValidatingAdmissionPolicy, not shadowgate's code, stops a stolen ServiceAccount
// token: each write is made with that token against the real API server.
func TestShadowgatesServiceAccountIsRefusedWhatNoShadowNeeds(t *testing.T) {
	const ns = "lp-writes"
	createNamespaces(t, ns)
	t.Cleanup(func() { kubectl(t, "", "delete", "namespace", ns, "--wait=false") })
	// What the cases below update or delete, made by the cluster admin.
	mustKubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: lp-ns-foreign}\n", "create", "-f", "-")
	mustKubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: lp-ns-marked-for, labels: {interlink.eu/shadow-namespace-for: lp-writes}}\n", "create", "-f", "-")
	mustKubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: lp-ns-created, labels: {interlink.eu/shadow-namespace-for: lp-writes, interlink.eu/created-by-shadowgate: \"true\"}}\n", "create", "-f", "-")
	for _, n := range []string{"lp-ns-foreign", "lp-ns-marked-for", "lp-ns-created"} {
		t.Cleanup(func() { kubectl(t, "", "delete", "namespace", n, "--wait=false", "--ignore-not-found") })
	}
	mustKubectl(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: lp-pod, namespace: "+ns+"}\nspec: {containers: [{name: c, image: busybox}]}\n", "create", "-f", "-")
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lp-foreign, namespace: "+ns+"}\ndata: {a: b}\n", "create", "-f", "-")
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shadowgate-scripts-3333333333, namespace: "+ns+"}\ndata: {a.sh: exit}\n", "create", "-f", "-")
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lp-adoptable, namespace: lp-ns-marked-for}\ndata: {a: b}\n", "create", "-f", "-")
	mustKubectl(t, "apiVersion: v1\nkind: Service\nmetadata: {name: lp-foreign, namespace: "+ns+"}\nspec: {ports: [{port: 80}]}\n", "create", "-f", "-")
	// A tenant's own Secret in its namespace, annotated as shadowgate annotates its copies.
	mustKubectl(t, secret(ns, "lp-planted", "", "{interlink.eu/replicated-from: shadowgate-system/lp-planted}", ""), "create", "-f", "-")
	apply := []string{"apply", "--server-side", "--field-manager=shadowgate", "-f", "-"}
	// A scripts ConfigMap (inject/scriptsconfigmap.go) named name, immutable or not.
	scriptsCM := func(name, immutable string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns +
			", labels: {app.kubernetes.io/managed-by: shadowgate, interlink.eu/shadow-role: scripts}}\nimmutable: " + immutable + "\ndata: {a.sh: 'true'}\n"
	}
	copyAnnotation := "{interlink.eu/replicated-from: shadowgate-system/hpc-ssh-key}"
	// Secrets are created and updated as shadowgate writes its copies: RBAC grants no patch.
	create, replace := []string{"create", "-f", "-"}, []string{"replace", "-f", "-"}
	// A Secret minting a token of the account default in the namespace it is written to.
	token := func(namespace string) string {
		return secret(namespace, "lp-token", "kubernetes.io/service-account-token",
			"{interlink.eu/replicated-from: shadowgate-system/hpc-ssh-key, kubernetes.io/service-account.name: default}", "")
	}
	// A merge patch putting shadowgate's labels on an object.
	marking := `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"shadowgate","interlink.eu/pod-uid":"00000000-0000-0000-0000-000000000018"}}}`
	markingAndData := `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"shadowgate","interlink.eu/pod-uid":"00000000-0000-0000-0000-000000000018"}},"data":{"a":"evil"}}`
	// Each is refused by the rule whose message (in part) is want.
	refused := map[string]struct {
		stdin, want string
		args        []string
	}{
		"a Deployment in kube-system is refused":                        {want: "may not write in kube-system", stdin: shadowDeployment("kube-system", "lp-ks", ""), args: apply},
		"a hostNetwork Deployment is refused":                           {want: "no host namespaces", stdin: shadowDeployment("default", "lp-hostnet", "      hostNetwork: true\n"), args: apply},
		"a hostPath Deployment is refused":                              {want: "hostPath volumes", stdin: shadowDeployment("default", "lp-hostpath", "      volumes: [{name: h, hostPath: {path: /}}]\n"), args: apply},
		"a NodePort Service is refused":                                 {want: "ClusterIP", stdin: "apiVersion: v1\nkind: Service\nmetadata: {name: lp-np, namespace: default, " + marked + "}\nspec: {type: NodePort, ports: [{port: 80}]}\n", args: apply},
		"a scripts ConfigMap that is not immutable is refused":          {want: "may only write configmaps it marks", stdin: scriptsCM("shadowgate-scripts-1111111111", "false"), args: apply},
		"a ConfigMap labelled as scripts under another name is refused": {want: "may only write configmaps it marks", stdin: scriptsCM("lp-scripts", "true"), args: apply},
		"taking over a foreign ConfigMap of a scripts ConfigMap's name is refused": {want: "may only update configmaps it marked before",
			// Forced, as shadowgate applies.
			stdin: scriptsCM("shadowgate-scripts-3333333333", "true"), args: []string{"apply", "--server-side", "--field-manager=shadowgate", "--force-conflicts", "-f", "-"}},
		"an externalIPs Service is refused":             {want: "without externalIPs", stdin: "apiVersion: v1\nkind: Service\nmetadata: {name: lp-ext, namespace: default, " + marked + "}\nspec: {externalIPs: [1.2.3.4], ports: [{port: 80}]}\n", args: apply},
		"a coredns ConfigMap in kube-system is refused": {want: "may not write in kube-system", stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: coredns, namespace: kube-system, " + marked + "}\ndata: {Corefile: evil}\n", args: apply},
		"an unmarked ConfigMap is refused":              {want: "may only write configmaps it marks", stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lp-unmarked, namespace: default}\ndata: {a: b}\n", args: apply},
		"a privileged container in a shadow Deployment is refused": {want: "no host namespaces, privilege", stdin: shadowDeploymentRunning(ns, "lp-privileged", "",
			"[{name: c, image: "+shadowImage+", securityContext: {privileged: true}}]"), args: apply},
		"a shadow Deployment running an image outside the allowed prefixes is refused": {want: "runs only images starting with ghcr.io/interlink-hq/shadowgate/shadow:", stdin: shadowDeploymentRunning(ns, "lp-image", "",
			"[{name: c, image: docker.io/library/busybox:1.37}]"), args: apply},
		"a shadow Deployment whose initContainer runs an image outside the allowed prefixes is refused": {want: "runs only images starting with", stdin: shadowDeploymentRunning(ns, "lp-init-image",
			"      initContainers: [{name: i, image: ghcr.io/interlink-hq/shadowgate/shadow-evil:0.1.0}]\n", "[{name: c, image: "+shadowImage+"}]"), args: apply},
		"a namespace annotation is refused":                                   {want: "changes only its own labels of a namespace", args: []string{"annotate", "namespace", "lp-ns-foreign", "example.org/owner=shadowgate"}},
		"a namespace label that is not shadowgate's is refused":               {want: "changes only its own labels of a namespace", args: []string{"label", "namespace", "lp-ns-foreign", "team=shadowgate"}},
		"adding interlink.eu/created-by-shadowgate to a namespace is refused": {want: "never interlink.eu/created-by-shadowgate", args: []string{"label", "namespace", "lp-ns-marked-for", "interlink.eu/created-by-shadowgate=true"}},
		"deleting a namespace shadowgate did not create is refused":           {want: "deletes only namespaces it created", args: []string{"delete", "namespace", "lp-ns-marked-for", "--wait=false"}},
		"deleting an unmarked namespace is refused":                           {want: "deletes only namespaces it created", args: []string{"delete", "namespace", "lp-ns-foreign", "--wait=false"}},
		"marking a foreign ConfigMap and changing its data is refused": {want: "may only update configmaps it marked before", args: []string{"patch", "configmap", "lp-foreign", "-n", ns, "--type=merge",
			"-p", markingAndData}},
		"marking a foreign ConfigMap without its data is refused": {want: "may only update configmaps it marked before", args: []string{"patch", "configmap", "lp-foreign", "-n", ns, "--type=merge", "-p", marking}},
		"marking a foreign Service is refused":                    {want: "may only update services it marked before", args: []string{"patch", "service", "lp-foreign", "-n", ns, "--type=merge", "-p", marking}},
		"adopting a ConfigMap outside a shadow namespace is refused": {want: "in a shadow namespace, adopt", args: []string{"annotate", "configmap", "lp-foreign", "-n", ns,
			"interlink.eu/replicated-from=shadowgate-system/lp-foreign"}},
		"a service-account token Secret annotated as a copy, in a namespace of another's, is refused": {want: "only in shadow namespaces", stdin: token(ns), args: create},
		"a service-account token Secret annotated as a copy, in a shadow namespace, is refused":       {want: "never a service-account token", stdin: token("lp-ns-marked-for"), args: create},
		"a basic-auth Secret annotated as a copy, in a shadow namespace, is refused": {want: "of type Opaque or kubernetes.io/ssh-auth",
			stdin: secret("lp-ns-marked-for", "lp-basic", "kubernetes.io/basic-auth", copyAnnotation, "{username: YQ==, password: YQ==}"), args: create},
		"a Secret annotated as a copy, in a namespace no shadow namespace, is refused": {want: "only in shadow namespaces", stdin: secret(ns, "hpc-ssh-key", "", copyAnnotation, ""), args: create},
		"a ConfigMap annotated as a copy, in a namespace no shadow namespace, is refused": {want: "only in shadow namespaces",
			stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hpc-known-hosts, namespace: " + ns + ", annotations: " + copyAnnotation + "}\ndata: {known_hosts: x}\n", args: apply},
		"overwriting a tenant's Secret annotated as a copy, outside shadow namespaces, is refused": {want: "only in shadow namespaces",
			stdin: secret(ns, "lp-planted", "", "{interlink.eu/replicated-from: shadowgate-system/lp-planted}", "{a: c2l0ZSBrZXk=}"), args: replace},
		"deleting a tenant's Secret annotated as a copy, outside shadow namespaces, is refused": {want: "only in shadow namespaces",
			args: []string{"delete", "secret", "lp-planted", "-n", ns}},
		"a Secret labelled as a shadow object is refused": {want: "writes only Secrets that are credential copies",
			stdin: "apiVersion: v1\nkind: Secret\nmetadata: {name: lp-labelled, namespace: lp-ns-marked-for, " + marked + "}\ndata: {a: YQ==}\n", args: create},
		"marking an existing namespace as a shadow namespace is refused": {want: "never sets, changes or removes the label interlink.eu/shadow-namespace-for",
			args: []string{"label", "namespace", "lp-ns-foreign", "interlink.eu/shadow-namespace-for=lp-writes"}},
		"changing the mark of a shadow namespace is refused": {want: "never sets, changes or removes the label interlink.eu/shadow-namespace-for",
			args: []string{"label", "namespace", "lp-ns-marked-for", "interlink.eu/shadow-namespace-for=lp-other", "--overwrite"}},
		"adopting a foreign ConfigMap while changing its data is refused": {want: "may only update configmaps it marked before", args: []string{"patch", "configmap", "lp-foreign", "-n", ns, "--type=merge",
			"-p", `{"metadata":{"annotations":{"interlink.eu/replicated-from":"shadowgate-system/lp-foreign"}},"data":{"a":"evil"}}`}},
		"making the front door's domains ConfigMap immutable is refused": {want: "only the ConfigMap shadowgate-front-door-domains, holding up to 256 domains",
			args: []string{"patch", "configmap", "shadowgate-front-door-domains", "-n", "shadowgate-system", "--type=merge", "--dry-run=server", "-p", `{"immutable":true}`}},
		"a top-level domain among the front door's domains is refused": {want: "only the ConfigMap shadowgate-front-door-domains, holding up to 256 domains",
			args: []string{"patch", "configmap", "shadowgate-front-door-domains", "-n", "shadowgate-system", "--type=merge", "--dry-run=server", "-p", `{"data":{"org":"x"}}`}},
		"an owner for the front door's domains ConfigMap is refused": {want: "only the ConfigMap shadowgate-front-door-domains, holding up to 256 domains",
			args: []string{"patch", "configmap", "shadowgate-front-door-domains", "-n", "shadowgate-system", "--type=merge", "--dry-run=server", "-p",
				`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"lp-ns-foreign","uid":"00000000-0000-0000-0000-000000000001"}]}}`}},
		"another ConfigMap in shadowgate's namespace is refused": {want: "writes no shadow object in its own namespace",
			stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lp-other, namespace: shadowgate-system}\ndata: {apps.example.org: x}\n", args: []string{"create", "--dry-run=server", "-f", "-"}},
	}
	for name, c := range refused {
		t.Run(name, func(t *testing.T) {
			r := kubectlAs(t, cluster.cp.ShadowgateKubeconfig, c.stdin, c.args...)
			if r.Err == nil || !strings.Contains(r.Stderr, "ValidatingAdmissionPolicy") || !strings.Contains(r.Stderr, c.want) {
				t.Fatalf("not refused by the least-privilege policy saying %q; kubectl printed:\n%s", c.want, r.Output())
			}
		})
	}
	t.Run("what was refused is left as it was", func(t *testing.T) {
		for _, n := range []string{"lp-ns-foreign", "lp-ns-marked-for"} {
			out := mustKubectl(t, "", "get", "namespace", n, "-o", "jsonpath={.metadata.deletionTimestamp}|{.metadata.labels}|{.metadata.annotations}")
			if !strings.HasPrefix(out, "|") || strings.Contains(out, "created-by-shadowgate") || strings.Contains(out, "team") || strings.Contains(out, "example.org") {
				t.Errorf("namespace %s was changed: %s", n, out)
			}
		}
		if out := mustKubectl(t, "", "get", "configmap", "lp-foreign", "-n", ns, "-o", "jsonpath={.data.a}|{.metadata.labels}|{.metadata.annotations}"); out != "b||" {
			t.Errorf("ConfigMap %s/lp-foreign was changed: %s", ns, out)
		}
		if out := mustKubectl(t, "", "get", "secret", "lp-planted", "-n", ns, "-o", "jsonpath={.data.a}"); out != "YQ==" {
			t.Errorf("Secret %s/lp-planted was changed: %s", ns, out)
		}
		if out := mustKubectl(t, "", "get", "namespace", "lp-ns-marked-for", "-o", "jsonpath={.metadata.labels.interlink\\.eu/shadow-namespace-for}"); out != "lp-writes" {
			t.Errorf("the mark of lp-ns-marked-for was changed: %q", out)
		}
		for _, where := range []string{ns, "lp-ns-marked-for"} {
			if ok, out := exists(t, "secret", "lp-token", "-n", where); ok {
				t.Errorf("a service-account token Secret was made: %s", out)
			}
		}
	})

	admitted := map[string]struct {
		stdin string
		args  []string
	}{
		"a shadow-shaped Service is admitted": {"apiVersion: v1\nkind: Service\nmetadata: {name: lp-ok, namespace: default, " + marked + "}\nspec: {ports: [{port: 80}]}\n", apply},
		"a shadow-shaped Deployment running the shadow image is admitted": {shadowDeploymentRunning(ns, "lp-ok",
			"      securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}\n"+
				"      initContainers: [{name: i, image: "+shadowImage+", "+restricted+"}]\n",
			"[{name: c, image: "+shadowImage+", "+restricted+"}]"), apply},
		"adopting an unmarked ConfigMap of a shadow namespace without changing its data is admitted": {"", []string{"annotate", "configmap", "lp-adoptable", "-n", "lp-ns-marked-for",
			"interlink.eu/replicated-from=shadowgate-system/lp-adoptable"}},
		"an immutable scripts ConfigMap is admitted":          {scriptsCM("shadowgate-scripts-2222222222", "true"), apply},
		"a copy of the key in a shadow namespace is admitted": {secret("lp-ns-marked-for", "hpc-ssh-key", "", copyAnnotation, ""), []string{"create", "-f", "-"}},
		"a copy of type kubernetes.io/ssh-auth in a shadow namespace is admitted": {secret("lp-ns-marked-for", "lp-ssh-auth", "kubernetes.io/ssh-auth", copyAnnotation,
			"{ssh-privatekey: YQ==}"), []string{"create", "-f", "-"}},
		"deleting a namespace shadowgate created is admitted": {"", []string{"delete", "namespace", "lp-ns-created", "--wait=false"}},
	}
	for name, c := range admitted {
		t.Run(name, func(t *testing.T) {
			r := kubectlAs(t, cluster.cp.ShadowgateKubeconfig, c.stdin, c.args...)
			if r.Err != nil {
				t.Fatalf("refused; kubectl printed:\n%s", r.Output())
			}
		})
	}
	// What shadowgate says about a pod goes to its Tunnel: it may write no pod at all, so no
	// write of its meets the virtual kubelet's status updates.
	t.Run("a pod write is refused by RBAC", func(t *testing.T) {
		for _, args := range [][]string{
			{"annotate", "pod", "lp-pod", "-n", ns, "example.org/x=y"},
			{"label", "pod", "lp-pod", "-n", ns, "app=lp"},
			{"delete", "pod", "lp-pod", "-n", ns, "--wait=false"},
		} {
			r := kubectlAs(t, cluster.cp.ShadowgateKubeconfig, "", args...)
			if r.Err == nil || !strings.Contains(r.Stderr, "forbidden") {
				t.Errorf("kubectl %s as shadowgate was not forbidden:\n%s", strings.Join(args, " "), r.Output())
			}
		}
	})
}

// secret is a Secret manifest: of type typ (empty: the API server's default, Opaque), with
// annotations and data as YAML flow mappings (empty data: {a: YQ==}).
func secret(namespace, name, typ, annotations, data string) string {
	if data == "" {
		data = "{a: YQ==}"
	}
	out := "apiVersion: v1\nkind: Secret\nmetadata: {name: " + name + ", namespace: " + namespace
	if annotations != "" {
		out += ", annotations: " + annotations
	}
	out += "}\ndata: " + data + "\n"
	if typ != "" {
		out += "type: " + typ + "\n"
	}
	return out
}
