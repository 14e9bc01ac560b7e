package e2e

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// digest is an image digest of the pattern the schema takes.
const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// writePolicyDocument writes the example policy's document to a file, for --set-file.
func writePolicyDocument(t *testing.T) string {
	t.Helper()
	docFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(docFile, []byte(examplePolicyDocument(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	return docFile
}

// renderedPod is the pod template of the chart's Deployment for the values given.
func renderedPod(t *testing.T, r rendered) corev1.PodTemplateSpec {
	t.Helper()
	var d appsv1.Deployment
	r.typed(t, "Deployment/shadowgate", &d)
	return d.Spec.Template
}

// The values operators set on every chart reach the shadowgate pods as given, and by default
// none of them is rendered: a priority class, affinity, pod annotations and labels (beside the
// selector labels, which still select the pods), environment variables, serve flags after the
// chart's own, and the image by digest, which the helm test Jobs run too.
func TestChartPodValues(t *testing.T) {
	plain := renderedPod(t, parseRendered(t, helmTemplate(t)))
	if s := plain.Spec; s.PriorityClassName != "" || s.Affinity != nil || plain.Annotations != nil || s.Containers[0].Env != nil || s.HostNetwork {
		t.Errorf("the default rendering sets a pod value: priorityClassName %q, affinity %v, annotations %v, env %v, hostNetwork %v",
			s.PriorityClassName, s.Affinity, plain.Annotations, s.Containers[0].Env, s.HostNetwork)
	}
	if img := plain.Spec.Containers[0].Image; img != "ghcr.io/interlink-hq/shadowgate:0.1.0" {
		t.Errorf("the default image is %s, want the repository at the chart's appVersion", img)
	}
	docFile := writePolicyDocument(t)
	r := parseRendered(t, helmTemplate(t, "--set-file", "policy="+docFile,
		"--set", "priorityClassName=system-cluster-critical",
		"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=node-role.kubernetes.io/control-plane",
		"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
		"--set-string", "podAnnotations.prometheus\\.io/scrape=true",
		"--set", "podLabels.team=hpc",
		"--set", "extraEnv[0].name=HTTPS_PROXY", "--set", "extraEnv[0].value=http://proxy:3128",
		"--set", "extraArgs={--leader-elect=true,--bind-address=0.0.0.0}",
		"--set", "image.digest="+digest))
	pod := renderedPod(t, r)
	if pod.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName: %q", pod.Spec.PriorityClassName)
	}
	if a := pod.Spec.Affinity; a == nil || a.NodeAffinity == nil ||
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != "node-role.kubernetes.io/control-plane" {
		t.Errorf("affinity: %+v", a)
	}
	if pod.Annotations["prometheus.io/scrape"] != "true" {
		t.Errorf("podAnnotations: %v", pod.Annotations)
	}
	if pod.Labels["team"] != "hpc" {
		t.Errorf("podLabels: %v", pod.Labels)
	}
	for what, sel := range webhookSelectors(t, r) {
		if !sel.Matches(labels.Set(pod.Labels)) {
			t.Errorf("with podLabels, the %s (%s) no longer selects the pods, labelled %v", what, sel, pod.Labels)
		}
	}
	c := pod.Spec.Containers[0]
	if d := cmp.Diff([]corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}}, c.Env); d != "" {
		t.Errorf("extraEnv (-want +got):\n%s", d)
	}
	if n := len(c.Args); n < 3 || !slices.Equal(c.Args[n-2:], []string{"--leader-elect=true", "--bind-address=0.0.0.0"}) || c.Args[0] != "serve" {
		t.Errorf("extraArgs are not serve's last flags: %q", c.Args)
	}
	want := "ghcr.io/interlink-hq/shadowgate:0.1.0@" + digest
	images := map[string]string{"Deployment/shadowgate": c.Image}
	for key, o := range r {
		if o.GetKind() == "Job" {
			var job batchv1.Job
			r.typed(t, key, &job)
			for _, ic := range slices.Concat(job.Spec.Template.Spec.InitContainers, job.Spec.Template.Spec.Containers) {
				if strings.Contains(ic.Image, "interlink-hq/shadowgate") && !strings.Contains(ic.Image, "/shadow:") {
					images[key+" "+ic.Name] = ic.Image
				}
			}
		}
	}
	if len(images) < 3 { // the Deployment, a doctor Job's init container, the install check
		t.Fatalf("found shadowgate's image only in %v", images)
	}
	for where, img := range images {
		if img != want {
			t.Errorf("%s runs %s, want %s", where, img, want)
		}
	}
}

// What would break the release is refused at `helm template`, naming the value: a pod label
// that is a selector label (the Deployment and Service would lose or steal pods), a serve flag
// the chart sets from a value (pflag keeps the last one, silently overriding the value), two
// ports alike, and by the schema a digest, url, flag or env var of the wrong shape.
func TestChartRefusesValuesThatBreakTheRelease(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"podLabels.app\\.kubernetes\\.io/name=other"}, "podLabels may not set app.kubernetes.io/name: it is a selector label"},
		{[]string{"podLabels.app\\.kubernetes\\.io/instance=other"}, "podLabels may not set app.kubernetes.io/instance"},
		{[]string{"extraArgs={--port=9444}"}, `extraArgs[0] "--port=9444" sets --port, which the chart sets itself from its values`},
		{[]string{"extraArgs={--leader-elect=false,--log-level=debug}"}, `extraArgs[1] "--log-level=debug" sets --log-level`},
		{[]string{"extraArgs={--client-ca-file=/x}"}, "sets --client-ca-file"},
		{[]string{"extraArgs={--credential-replication=false}"}, "sets --credential-replication"},
		{[]string{"probesPort=8080"}, "metrics.port and probesPort are both 8080: give each its own port"},
		{[]string{"webhooks.port=8081"}, "webhooks.port and probesPort are both 8081"},
		{[]string{"webhooks.port=8080"}, "webhooks.port and metrics.port are both 8080"},
		{[]string{"image.digest=sha256:abc"}, "/image/digest"},
		{[]string{"image.digest=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, "/image/digest"},
		{[]string{"webhooks.url=http://shadowgate.example.org"}, "/webhooks/url"},
		{[]string{"webhooks.url=https://user@shadowgate.example.org"}, "/webhooks/url"},
		{[]string{"webhooks.url=https://shadowgate.example.org/?q=1"}, "/webhooks/url"},
		{[]string{"extraArgs={-v=4}"}, "/extraArgs/0"},
		{[]string{"extraEnv[0].value=x"}, "/extraEnv/0"},
		{[]string{"hostNetwork=yes"}, "/hostNetwork"},
		{[]string{"webhooks.port=0"}, "/webhooks/port"},
		{[]string{"probesPort=70000"}, "/probesPort"},
		{[]string{"podAnnotations.a=1"}, "/podAnnotations/a"},
		{[]string{"installCheck.namespace=Default"}, "/installCheck/namespace"},
		{[]string{"installCheck.namespace=kube-system"}, "installCheck.namespace kube-system is one of webhooks.exemptNamespaces"},
	} {
		args := []string{"template", "shadowgate", chartDir, "--namespace", "shadowgate-system"}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		if _, err := runHelm(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %v: got %v, want an error naming %s", c.set, err, c.want)
		}
	}
	// Flags the chart does not set are serve's to take; a value the schema types as a string
	// is taken as one.
	helmTemplate(t, "--set", "extraArgs={--leader-elect=false}", "--set-string", "podAnnotations.a=1")
}

// hostNetwork runs the pods in the node's network, where the API server reaches them at the
// node's address: serve listens on webhooks.port, probesPort and metrics.port, each a
// container port (so the node's port, and the scheduler keeps two replicas off one node), the
// probes and the Service's webhook and metrics ports follow them by name, and cluster DNS
// still resolves (ClusterFirstWithHostNet). Without it, the pods keep their own network.
func TestChartHostNetwork(t *testing.T) {
	for _, c := range []struct {
		set                         []string
		host                        bool
		webhook, probes, metricPort int32
	}{
		{nil, false, 9443, 8081, 8080},
		{[]string{"--set", "hostNetwork=true", "--set", "webhooks.port=10443", "--set", "probesPort=10481", "--set", "metrics.port=10480"}, true, 10443, 10481, 10480},
	} {
		r := parseRendered(t, helmTemplate(t, c.set...))
		pod := renderedPod(t, r)
		if pod.Spec.HostNetwork != c.host || (pod.Spec.DNSPolicy == corev1.DNSClusterFirstWithHostNet) != c.host {
			t.Errorf("%v: hostNetwork %v, dnsPolicy %q", c.set, pod.Spec.HostNetwork, pod.Spec.DNSPolicy)
		}
		ctr := pod.Spec.Containers[0]
		ports := map[string]int32{}
		for _, p := range ctr.Ports {
			ports[p.Name] = p.ContainerPort
		}
		if d := cmp.Diff(map[string]int32{"webhook": c.webhook, "probes": c.probes, "metrics": c.metricPort}, ports); d != "" {
			t.Errorf("%v: container ports (-want +got):\n%s", c.set, d)
		}
		for _, arg := range []string{"--port=" + itoa(c.webhook), "--health-probe-bind-address=:" + itoa(c.probes), "--metrics-bind-address=:" + itoa(c.metricPort)} {
			if !slices.Contains(ctr.Args, arg) {
				t.Errorf("%v: serve runs without %s: %q", c.set, arg, ctr.Args)
			}
		}
		if ctr.ReadinessProbe.HTTPGet.Port.StrVal != "probes" || ctr.LivenessProbe.HTTPGet.Port.StrVal != "probes" {
			t.Errorf("%v: the probes do not use the probes port by name", c.set)
		}
		var svc corev1.Service
		r.typed(t, "Service/shadowgate", &svc)
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.StrVal != p.Name {
				t.Errorf("%v: Service port %s targets %v, want the container port of that name", c.set, p.Name, p.TargetPort)
			}
		}
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// webhookClientConfigs are each webhook's clientConfig of the rendered configurations, by name.
func webhookClientConfigs(t *testing.T, r rendered) map[string]admissionv1.WebhookClientConfig {
	t.Helper()
	var m admissionv1.MutatingWebhookConfiguration
	var v admissionv1.ValidatingWebhookConfiguration
	r.typed(t, "MutatingWebhookConfiguration/shadowgate", &m)
	r.typed(t, "ValidatingWebhookConfiguration/shadowgate", &v)
	out := map[string]admissionv1.WebhookClientConfig{}
	for _, w := range m.Webhooks {
		out[w.Name] = w.ClientConfig
	}
	for _, w := range v.Webhooks {
		out[w.Name] = w.ClientConfig
	}
	return out
}

// webhooks.url replaces every webhook's Service reference by the URL with the webhook's path,
// and the serving certificate the chart makes (or has cert-manager issue) names the URL's host,
// as a DNS name or an IP address, beside the Service's name: the API server checks it against
// the host it calls.
func TestChartWebhookURL(t *testing.T) {
	paths := map[string]string{
		"mutate-pods.shadowgate.interlink.eu": "/mutate-pods", "validate-pods.shadowgate.interlink.eu": "/validate-pods",
		"validate-workloads.shadowgate.interlink.eu": "/validate-workloads", "validate-configmaps.shadowgate.interlink.eu": "/validate-configmaps",
		"validate-policy.shadowgate.interlink.eu": "/validate-configmaps",
	}
	for name, cc := range webhookClientConfigs(t, parseRendered(t, helmTemplate(t))) {
		if cc.URL != nil || cc.Service == nil || cc.Service.Name != "shadowgate" {
			t.Errorf("by default %s is not called through the Service: %+v", name, cc)
		}
	}
	for _, c := range []struct {
		url, base string
		dns       []string
		ip        string
	}{
		{"https://shadowgate.example.org:8443/", "https://shadowgate.example.org:8443", []string{"shadowgate.shadowgate-system.svc", "shadowgate.example.org"}, ""},
		{"https://10.1.2.3", "https://10.1.2.3", []string{"shadowgate.shadowgate-system.svc"}, "10.1.2.3"},
		{"https://[fd00::10]:9443/hooks", "https://[fd00::10]:9443/hooks", []string{"shadowgate.shadowgate-system.svc"}, "fd00::10"},
	} {
		r := parseRendered(t, helmTemplate(t, "--set", "webhooks.url="+c.url))
		configs := webhookClientConfigs(t, r)
		if len(configs) != len(paths) {
			t.Fatalf("%s: webhooks %v, want %v", c.url, slices.Collect(maps.Keys(configs)), paths)
		}
		for name, cc := range configs {
			if want := c.base + paths[name]; cc.Service != nil || cc.URL == nil || *cc.URL != want {
				t.Errorf("%s: %s's clientConfig is %+v, want url %s and no service", c.url, name, cc, want)
			}
		}
		var secret corev1.Secret
		r.typed(t, "Secret/shadowgate-tls", &secret)
		cert := parseCert(t, secret.Data["tls.crt"])
		var ips []string
		for _, ip := range cert.IPAddresses {
			ips = append(ips, ip.String())
		}
		if !slices.Equal(cert.DNSNames, c.dns) || (c.ip == "") != (len(ips) == 0) || (c.ip != "" && !slices.Equal(ips, []string{c.ip})) {
			t.Errorf("%s: the serving certificate is for DNS %v and IPs %v, want %v and %q", c.url, cert.DNSNames, ips, c.dns, c.ip)
		}
		roots := x509.NewCertPool()
		roots.AddCert(parseCert(t, secret.Data["ca.crt"]))
		host := c.ip
		if host == "" {
			host = c.dns[1]
		}
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("%s: the certificate does not verify for %s against the caBundle's CA: %v", c.url, host, err)
		}
		for name, cc := range configs {
			if string(cc.CABundle) != string(secret.Data["ca.crt"]) {
				t.Errorf("%s: %s's caBundle is not the CA of the Secret", c.url, name)
			}
		}

		var certificate struct {
			Spec struct {
				DNSNames    []string `json:"dnsNames"`
				IPAddresses []string `json:"ipAddresses"`
			} `json:"spec"`
		}
		parseRendered(t, helmTemplate(t, "--set", "certManager.enabled=true", "--set", "webhooks.url="+c.url)).typed(t, "Certificate/shadowgate-serving", &certificate)
		if !slices.Equal(certificate.Spec.DNSNames, c.dns) || !slices.Equal(certificate.Spec.IPAddresses, ips) {
			t.Errorf("%s: cert-manager's Certificate is for DNS %v and IPs %v, want %v and %v", c.url, certificate.Spec.DNSNames, certificate.Spec.IPAddresses, c.dns, ips)
		}
	}
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("no PEM block in %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// `helm test` runs `shadowgate check install` in a Job of shadowgate's image, in namespace
// installCheck.namespace, as a ServiceAccount whose only right is to create pods there; the
// ServiceAccount, Role and binding are test hooks made before the Job, so none of it exists
// outside a test. The Job's pods are not the webhook's.
func TestChartInstallCheckJob(t *testing.T) {
	r := parseRendered(t, helmTemplate(t, "--set", "installCheck.namespace=user"))
	var job batchv1.Job
	r.typed(t, "Job/shadowgate-install-check", &job)
	spec := job.Spec.Template.Spec
	c := spec.Containers[0]
	if !slices.Equal(c.Args, []string{"check", "install", "--namespace=user", "--wait=2m"}) || c.Image != "ghcr.io/interlink-hq/shadowgate:0.1.0" ||
		spec.ServiceAccountName != "shadowgate-install-check" || spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("the Job does not run shadowgate check install as its ServiceAccount: %+v", spec)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Error("the Job does not run under the restricted security context")
	}
	for what, sel := range webhookSelectors(t, r) {
		if sel.Matches(labels.Set(job.Spec.Template.Labels)) {
			t.Errorf("the check's pods, labelled %v, are selected by the webhook's %s (%s)", job.Spec.Template.Labels, what, sel)
		}
	}
	for _, key := range []string{"Job/shadowgate-install-check", "ServiceAccount/shadowgate-install-check", "Role/shadowgate-install-check", "RoleBinding/shadowgate-install-check"} {
		o, ok := r[key]
		if !ok {
			t.Fatalf("no %s rendered", key)
		}
		a := o.GetAnnotations()
		weight := a["helm.sh/hook-weight"]
		if a["helm.sh/hook"] != "test" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" || (o.GetKind() != "Job") != (weight == "-1") {
			t.Errorf("%s is not a test hook deleted after success, made before the Job: %v", key, a)
		}
	}
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	r.typed(t, "Role/shadowgate-install-check", &role)
	r.typed(t, "RoleBinding/shadowgate-install-check", &binding)
	if d := cmp.Diff([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}}, role.Rules); d != "" || role.Namespace != "user" {
		t.Errorf("the Role in %q grants more than creating pods there (-want +got):\n%s", role.Namespace, d)
	}
	if binding.Namespace != "user" || binding.RoleRef.Name != role.Name ||
		!slices.Equal(binding.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "shadowgate-install-check", Namespace: "shadowgate-system"}}) {
		t.Errorf("the RoleBinding does not give the Role to the check's ServiceAccount: %+v", binding)
	}
	// Disabled, or in the release namespace, which the pod webhooks exempt (the install notes
	// say the check is left out), none of it is rendered.
	for _, set := range []string{"installCheck.enabled=false", "installCheck.namespace=shadowgate-system"} {
		for key := range parseRendered(t, helmTemplate(t, "--set", set)) {
			if strings.Contains(key, "install-check") {
				t.Errorf("%s still renders %s", set, key)
			}
		}
	}
}

// The kustomize components are the chart's options: webhook-network-policy is the chart's
// NetworkPolicy for its webhook peer (a documentation address that admits nobody until
// patched), and webhook-client-ca runs serve with the chart's --client-ca-file, mounting the
// ConfigMap as the chart mounts clientCAConfigMap.
func TestWebhookComponentsAreTheChartsOptions(t *testing.T) {
	var chartNP, componentNP networkingv1.NetworkPolicy
	parseRendered(t, helmTemplate(t, "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.webhookFrom[0].ipBlock.cidr=192.0.2.1/32")).typed(t, "NetworkPolicy/shadowgate", &chartNP)
	component := parseRendered(t, kustomizeWith(t, "manifests/components/webhook-network-policy"))
	component.typed(t, "NetworkPolicy/shadowgate", &componentNP)
	compare(t, "NetworkPolicy rules", []any{componentNP.Spec.Ingress, componentNP.Spec.PolicyTypes}, []any{chartNP.Spec.Ingress, chartNP.Spec.PolicyTypes})
	sel, err := metav1.LabelSelectorAsSelector(&componentNP.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if pod := renderedPod(t, component); !sel.Matches(labels.Set(pod.Labels)) || componentNP.Namespace != "shadowgate-system" {
		t.Errorf("the component's NetworkPolicy in %s does not select the shadowgate pods (%s, labelled %v)", componentNP.Namespace, sel, pod.Labels)
	}

	chart := renderedPod(t, parseRendered(t, helmTemplate(t, "--set", "clientCAConfigMap=shadowgate-webhook-client-ca")))
	withCA := renderedPod(t, parseRendered(t, kustomizeWith(t, "manifests/components/webhook-client-ca")))
	compare(t, "volumes", chart.Spec.Volumes, withCA.Spec.Volumes)
	compare(t, "volume mounts", chart.Spec.Containers[0].VolumeMounts, withCA.Spec.Containers[0].VolumeMounts)
	const arg = "--client-ca-file=/etc/shadowgate/client-ca/ca.crt"
	if !slices.Contains(withCA.Spec.Containers[0].Args, arg) || !slices.Contains(chart.Spec.Containers[0].Args, arg) {
		t.Errorf("serve runs without %s: kustomize %q, chart %q", arg, withCA.Spec.Containers[0].Args, chart.Spec.Containers[0].Args)
	}
}

// `helm upgrade` keeps the chart's own certificate while the names it must hold stay the same,
// a Secret of an earlier chart (made for the Service's name, without the annotation that
// records its names) included, and makes a new CA and certificate, trusted at once by every
// webhook, when webhooks.url brings a host the certificate does not name.
func TestChartUpgradeRenewsItsCertificateForANewURL(t *testing.T) {
	c := newChartCluster(t)
	release := []string{"shadowgate", chartDir, "--namespace", "shadowgate-system", "--kubeconfig", c.k.Kubeconfig}
	helm(t, append([]string{"install"}, release...)...)
	c.must(t, "", "annotate", "secret", "shadowgate-tls", "-n", "shadowgate-system", "shadowgate.interlink.eu/serving-hosts-")
	before := c.tlsState(t)
	helm(t, append([]string{"upgrade", "--reuse-values", "--set", "logLevel=debug"}, release...)...)
	if after := c.tlsState(t); after != before {
		t.Errorf("an upgrade that names no new host replaced an earlier chart's certificate:\nbefore %s\nafter  %s", before, after)
	}
	helm(t, append([]string{"upgrade", "--reuse-values", "--set", "webhooks.url=https://shadowgate.example.org:8443"}, release...)...)
	renewed := c.tlsState(t) // every caBundle is the new Secret's CA
	if renewed == before {
		t.Fatal("webhooks.url named a new host, and the certificate was kept")
	}
	ca, cert, _ := strings.Cut(renewed, " ")
	decode := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	roots := x509.NewCertPool()
	roots.AddCert(parseCert(t, decode(ca)))
	for _, host := range []string{"shadowgate.example.org", "shadowgate.shadowgate-system.svc"} {
		if _, err := parseCert(t, decode(cert)).Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("the renewed certificate does not verify for %s: %v", host, err)
		}
	}
	helm(t, append([]string{"upgrade", "--reuse-values", "--set", "logLevel=info"}, release...)...)
	if after := c.tlsState(t); after != renewed {
		t.Error("a later upgrade with the same webhooks.url replaced the certificate again")
	}
}

// everyNewValue sets each value the chart takes for the pods, the node's network, the URL and
// the install check, as an operator would.
const everyNewValue = `image:
  digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
priorityClassName: system-cluster-critical
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector: {matchLabels: {app.kubernetes.io/name: shadowgate}}
podAnnotations: {example.org/owner: hpc-team}
podLabels: {team: hpc}
extraArgs: ["--bind-address=$(HOST_IP)"]
extraEnv:
- name: HOST_IP
  valueFrom: {fieldRef: {fieldPath: status.hostIP}}
hostNetwork: true
probesPort: 10481
metrics: {port: 10480}
webhooks:
  port: 10443
  url: https://shadowgate.example.org:10443
installCheck: {enabled: true, namespace: user}
`

// helm lint --strict passes with every new value set, with and without cert-manager, and the
// chart renders them (lint reports a template's refusal only in its log, and passes).
func TestChartLintsWithEveryNewValue(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(everyNewValue), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, certManager} {
		out := helm(t, append([]string{"lint", "--strict", chartDir, "--namespace", "shadowgate-system", "--values", values}, args...)...)
		expectContains(t, out, "1 chart(s) linted, 0 chart(s) failed")
		if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Errorf("helm lint %v reports a problem:\n%s", args, out)
		}
		r := parseRendered(t, helmTemplate(t, append([]string{"--values", values}, args...)...))
		if pod := renderedPod(t, r); !pod.Spec.HostNetwork || pod.Spec.Containers[0].Image != "ghcr.io/interlink-hq/shadowgate:0.1.0@"+digest {
			t.Errorf("%v: the values are not rendered: %+v", args, pod.Spec)
		}
		if _, ok := r["Job/shadowgate-install-check"]; !ok {
			t.Errorf("%v: no install check rendered", args)
		}
	}
}
