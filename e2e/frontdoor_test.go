package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/validate"
)

// frontDoorNode is a virtual node of the example policy's site with a front door through an
// Ingress, its TLS from the wildcard certificate in Secret frontDoorSecret.
const (
	frontDoorNode   = "door-vk"
	frontDoorDomain = "apps.example.org"
	frontDoorSecret = "apps-wildcard-tls"
)

// A pod on a node with a front door gets an Ingress in its shadow namespace, at the shadow's
// name: its host is the one shadowgate derives from the pod, under the policy's domain, with
// TLS from the copy of the wildcard certificate. A namespace-only tenant can neither read that
// copy nor plant an Ingress marked as shadowgate's in its own namespace; the Ingress goes with
// the pod's shadow.
func TestTheFrontDoorGoesWithTheShadowAndNoTenantReadsOrPlantsIt(t *testing.T) {
	const ns, tenant = "door-user", "door-tenant"
	createNamespaces(t, ns)
	pod := offloaded{name: "notebook", namespace: ns, node: frontDoorNode, ports: []int32{8888}}
	t.Cleanup(func() {
		kubectl(t, "", "delete", "namespace", ns, pod.shadowNamespace(), "--wait=false", "--ignore-not-found")
	})
	withFrontDoorPolicy(t)
	grantEdit(t, tenant, ns)
	as := "--as=" + tenant

	// A pod may narrow what is published to ports it declares, and only to those.
	undeclared := offloaded{name: "undeclared", namespace: ns, node: frontDoorNode, ports: []int32{8888},
		annotations: map[string]string{validate.AnnotationFrontDoorPorts: "8888 22"}}
	if r := kubectl(t, undeclared.json(), as, "apply", "-f", "-"); r.Err == nil {
		t.Errorf("a pod publishing a port it does not declare was admitted:\n%s", r.Output())
	} else {
		expectContains(t, r.Stderr, `metadata.annotations[interlink.eu/front-door-ports]: Invalid value: "22": port 22 is not a TCP port the pod declares`)
	}

	mustKubectl(t, pod.json(), "apply", "-f", "-")
	shadowNS := pod.shadowNamespace()
	ing := &networkingv1.Ingress{}
	if err := json.Unmarshal([]byte(mustKubectl(t, "", "get", "ingress", pod.shadowName(), "-n", shadowNS, "-o", "json")), ing); err != nil {
		t.Fatal(err)
	}
	uid := mustKubectl(t, "", "get", "pod", pod.name, "-n", ns, "-o", "jsonpath={.metadata.uid}")
	host := inject.FrontDoorHost(pod.name, pod.namespace, types.UID(uid), 8888, frontDoorDomain)
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != host || len(ing.Spec.TLS) != 1 ||
		ing.Spec.TLS[0].SecretName != frontDoorSecret || len(ing.Spec.TLS[0].Hosts) != 1 || ing.Spec.TLS[0].Hosts[0] != host {
		t.Fatalf("the shadow's Ingress is %+v, want host %s with TLS from %s", ing.Spec, host, frontDoorSecret)
	}
	copied := mustKubectl(t, "", "get", "secret", frontDoorSecret, "-n", shadowNS, "-o", "jsonpath={.type} {.metadata.annotations.interlink\\.eu/replicated-from}")
	if copied != "kubernetes.io/tls shadowgate-system/"+frontDoorSecret {
		t.Errorf("the certificate's copy in %s is %q, want a kubernetes.io/tls copy of shadowgate-system/%s", shadowNS, copied, frontDoorSecret)
	}

	for _, args := range [][]string{
		{"get", "secret", frontDoorSecret, "-n", shadowNS},
		{"get", "ingress", pod.shadowName(), "-n", shadowNS},
	} {
		if r := kubectl(t, "", append([]string{as}, args...)...); r.Err == nil || !strings.Contains(r.Stderr, "forbidden") {
			t.Errorf("the tenant ran kubectl %s:\n%s", strings.Join(args, " "), r.Output())
		}
	}
	// Its host is outside the domain, which another policy keeps for shadowgate alone
	// (TestNoTenantPublishesAHostUnderTheFrontDoorsDomain).
	planted := "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: " + pod.shadowName() + ", namespace: " + ns +
		", labels: {app.kubernetes.io/managed-by: shadowgate, interlink.eu/pod-uid: planted}, annotations: {interlink.eu/shadow-for: " + ns + "/" + pod.name + "}}\n" +
		"spec: {rules: [{host: planted.example.net, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: x, port: {number: 80}}}}]}}]}\n"
	if r := kubectl(t, planted, as, "create", "-f", "-"); r.Err == nil {
		t.Errorf("the tenant created an Ingress marked as shadowgate's:\n%s", r.Output())
	} else {
		expectContains(t, r.Stderr, "ValidatingAdmissionPolicy 'shadowgate-shadow-object-marks'")
	}

	mustKubectl(t, "", "delete", "pod", pod.name, "-n", ns, "--wait=false")
	eventually(t, time.Minute, "the shadow's Ingress deleted with the pod", func() (bool, string) {
		ok, out := exists(t, "ingress", pod.shadowName(), "-n", shadowNS)
		return !ok, out
	})
}

// While a node's front door publishes under a domain, the API server refuses a host under it,
// or a wildcard covering it, in any Ingress but shadowgate's and the cluster admins': a
// namespace-only tenant cannot take a pod's URL nor have a certificate issued for it. Hosts
// elsewhere stay the tenant's, and the domain is released when the policy no longer has it.
func TestNoTenantPublishesAHostUnderTheFrontDoorsDomain(t *testing.T) {
	const ns, tenant = "door-claims", "door-claimer"
	createNamespaces(t, ns)
	t.Cleanup(func() { kubectl(t, "", "delete", "namespace", ns, "--wait=false", "--ignore-not-found") })
	grantEdit(t, tenant, ns)
	as := "--as=" + tenant
	ingress := func(rulesHost, tlsHost string) string {
		doc := "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: mine, namespace: " + ns + "}\n" +
			"spec:\n  rules: [{host: '" + rulesHost + "', http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]\n"
		if tlsHost != "" {
			doc += "  tls: [{hosts: ['" + tlsHost + "'], secretName: mine-tls}]\n"
		}
		return doc
	}
	const refused = `ValidatingAdmissionPolicy 'shadowgate-front-door-hosts'`
	victim := "notebook-user-8888-0123456789abcdef0123." + frontDoorDomain

	withFrontDoorPolicy(t)
	eventually(t, time.Minute, "the API server to refuse a tenant's host under the front door's domain", func() (bool, string) {
		r := kubectl(t, ingress(victim, ""), as, "create", "--dry-run=server", "-f", "-")
		return r.Err != nil && strings.Contains(r.Stderr, refused), r.Output()
	})
	for what, doc := range map[string]string{
		"a rule's host under the domain": ingress(victim, ""),
		"a TLS host under the domain":    ingress("web.tenant.example.net", victim),
		"a wildcard covering the domain": ingress("*.example.org", ""),
	} {
		r := kubectl(t, doc, as, "create", "--dry-run=server", "-f", "-")
		if r.Err == nil {
			t.Errorf("the tenant's Ingress with %s was admitted", what)
			continue
		}
		expectContains(t, r.Stderr, refused, "is under a domain whose hosts only shadowgate publishes ("+frontDoorDomain+")")
	}
	mustKubectl(t, ingress("web.tenant.example.net", ""), as, "create", "--dry-run=server", "-f", "-")
	mustKubectl(t, ingress(victim, ""), "create", "--dry-run=server", "-f", "-") // the cluster admin

	// cert-manager's ACME HTTP-01 solver for a front door's own certificate passes in a shadow
	// namespace, on challenge paths only; nowhere else, and no one else's.
	shadowNS := ns + "-shadow"
	mustKubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+shadowNS+", labels: {interlink.eu/shadow-namespace-for: "+ns+"}}\n", "create", "-f", "-")
	t.Cleanup(func() { kubectl(t, "", "delete", "namespace", shadowNS, "--wait=false", "--ignore-not-found") })
	const certManager = "system:serviceaccount:cert-manager:cert-manager"
	for _, n := range []string{ns, shadowNS} {
		mustKubectl(t, "", "create", "role", "solver", "-n", n, "--verb=get,create,update,patch", "--resource=ingresses.networking.k8s.io")
		mustKubectl(t, "", "create", "rolebinding", "solver", "-n", n, "--role=solver", "--user="+certManager, "--user=lb-controller")
	}
	solver := func(namespace, path string) string {
		return "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {generateName: cm-acme-http-solver-, namespace: " + namespace +
			", labels: {acme.cert-manager.io/http01-solver: \"true\"}}\n" +
			"spec: {rules: [{host: " + victim + ", http: {paths: [{path: '" + path + "', pathType: ImplementationSpecific, backend: {service: {name: cm-acme-http-solver-x, port: {number: 8089}}}}]}}]}\n"
	}
	mustKubectl(t, solver(shadowNS, "/.well-known/acme-challenge/tok3n"), "--as="+certManager, "create", "--dry-run=server", "-f", "-")
	for what, c := range map[string]struct{ doc, user string }{
		"a solver outside a shadow namespace":     {solver(ns, "/.well-known/acme-challenge/tok3n"), certManager},
		"a solver serving more than a challenge":  {solver(shadowNS, "/"), certManager},
		"a solver's labels on a tenant's Ingress": {solver(ns, "/.well-known/acme-challenge/tok3n"), tenant},
	} {
		r := kubectl(t, c.doc, "--as="+c.user, "create", "--dry-run=server", "-f", "-")
		if r.Err == nil || !strings.Contains(r.Stderr, refused) {
			t.Errorf("%s was not refused by the front door's host policy:\n%s", what, r.Output())
		}
	}

	// Another controller's finalizer on an Ingress under the domain passes; a change of its
	// annotations does not.
	mustKubectl(t, ingress(victim, ""), "create", "-f", "-") // the cluster admin
	t.Cleanup(func() {
		kubectl(t, "", "patch", "ingress", "mine", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		kubectl(t, "", "delete", "ingress", "mine", "-n", ns, "--ignore-not-found")
	})
	mustKubectl(t, "", "--as=lb-controller", "patch", "ingress", "mine", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":["example.org/load-balancer"]}}`)
	if r := kubectl(t, "", "--as=lb-controller", "patch", "ingress", "mine", "-n", ns, "--type=merge", "-p", `{"metadata":{"annotations":{"a":"b"}}}`); r.Err == nil || !strings.Contains(r.Stderr, refused) {
		t.Errorf("another account's annotation on an Ingress under the domain was not refused:\n%s", r.Output())
	}
	kubectl(t, "", "patch", "ingress", "mine", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	mustKubectl(t, "", "delete", "ingress", "mine", "-n", ns)

	mustKubectl(t, "", "apply", "-f", exampleFile("policy.yaml"))
	eventually(t, time.Minute, "the domain released once the policy has no front door", func() (bool, string) {
		r := kubectl(t, ingress(victim, ""), as, "create", "--dry-run=server", "-f", "-")
		return r.Err == nil, r.Output()
	})
}

// A policy whose front door is unsafe is refused at its apply, naming the key.
func TestAnUnsafeFrontDoorIsRefusedAtThePolicysApply(t *testing.T) {
	for _, c := range []struct{ lines, want string }{
		{"WildcardDNS: 10.0.0.1\n", "Network.WildcardDNS: Invalid value: \"10.0.0.1\""},
		{"WildcardDNS: " + frontDoorDomain + "\nIngressTLS: false\nFrontDoor: {IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n", "Network.IngressTLS: Forbidden"},
	} {
		r := kubectl(t, frontDoorPolicy(t, c.lines), "apply", "--dry-run=server", "-f", "-")
		if r.Err == nil {
			t.Errorf("a policy with %q was admitted", c.lines)
			continue
		}
		expectContains(t, r.Stderr, c.want)
	}
}

// withFrontDoorPolicy applies the example policy with frontDoorNode added, and the wildcard
// certificate in shadowgate's namespace; the example policy comes back when the test ends.
func withFrontDoorPolicy(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	cert, key := wildcardCertificate(t, "*."+frontDoorDomain)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for file, data := range map[string][]byte{certFile: cert, keyFile: key} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mustKubectl(t, "", "create", "secret", "tls", frontDoorSecret, "-n", "shadowgate-system", "--cert="+certFile, "--key="+keyFile)
	t.Cleanup(func() {
		kubectl(t, "", "apply", "-f", exampleFile("policy.yaml"))
		kubectl(t, "", "delete", "secret", frontDoorSecret, "-n", "shadowgate-system", "--ignore-not-found")
	})
	mustKubectl(t, frontDoorPolicy(t, "WildcardDNS: '*."+frontDoorDomain+"'\nFrontDoor: {TLSSecret: "+frontDoorSecret+", IngressClassName: nginx, ControllerNamespace: ingress-nginx}\n"), "apply", "-f", "-")
	eventually(t, time.Minute, "the webhook to judge pods by the front-door policy", func() (bool, string) {
		// A pod that narrows the front door's ports is admitted only once its node has one.
		probe := offloaded{name: "probe", namespace: "default", node: frontDoorNode, ports: []int32{8888},
			annotations: map[string]string{validate.AnnotationFrontDoorPorts: "8888"}}
		r := kubectl(t, probe.json(), "apply", "--dry-run=server", "-f", "-")
		return r.Err == nil, r.Output()
	})
}

// frontDoorPolicy is the example policy ConfigMap with frontDoorNode added: hpc-vk's site, with
// network lines added to its Network block.
func frontDoorPolicy(t *testing.T, network string) string {
	t.Helper()
	example, err := os.ReadFile(exampleFile("policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for line := range strings.Lines(network) {
		lines.WriteString("          " + line)
	}
	node := "      " + frontDoorNode + ":\n        Network:\n          EnableTunnel: true\n          ShadowMode: ssh\n" + lines.String() +
		"          SSH:\n            LoginHost: login.hpc.example.org\n            User: alice\n            KeySecret: hpc-ssh-key\n            KnownHostsConfigMap: hpc-known-hosts\n"
	changed := strings.Replace(string(example), "    virtualNodes:\n", "    virtualNodes:\n"+node, 1)
	if changed == string(example) {
		t.Fatal("the example policy has no virtualNodes line to add a node beside")
	}
	return changed
}

// wildcardCertificate is a self-signed certificate for name and its key, PEM-encoded.
func wildcardCertificate(t *testing.T, name string) (cert, key []byte) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
