package offload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/harness"
	"github.com/interlink-hq/shadowgate/validate"
)

// The front door's parts on the site: Traefik, the ingress controller, runs as a pod on the
// cluster node behind IngressClass frontDoorClass; cert-manager issues each shadow's
// certificate from ClusterIssuer frontDoorIssuer, a CA of its own making.
const (
	frontDoorNS     = "front-door"
	frontDoorClass  = "traefik"
	frontDoorIssuer = "e2e-front-door"
	frontDoorDomain = "apps.site.test"
	// frontDoorGateway is the Gateway of Traefik's GatewayClass in frontDoorNS (startGateway).
	frontDoorGateway = "front-door"
	// frontDoorPort is Traefik's HTTPS entry point on its pod.
	frontDoorPort = 8443
)

// A notebook on a node with a front door is reached from the host over HTTPS, through a real
// ingress controller running on the cluster node, with the certificate cert-manager issued for
// the host shadowgate derived, at the URL the pod's TunnelReady Event printed.
func TestTheFrontDoorServesTheNotebookOverHTTPS(t *testing.T) {
	const ns = "front-door-user"
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ca := startCertManagerCA(ctx, t)
	controller := startTraefik(ctx, t)
	withFrontDoor(t, fmt.Sprintf("IngressClusterIssuer: %s\nFrontDoor: {IngressClassName: %s, ControllerNamespace: %s}\n",
		frontDoorIssuer, frontDoorClass, frontDoorNS))

	s, host, served := reachThroughFrontDoor(t, ns, ca, controller)
	if !slices.Equal(served.DNSNames, []string{host}) {
		t.Errorf("the certificate served for %s names %v: want the shadow's own, for its host alone", host, served.DNSNames)
	}
	secret := kubectl(t, "", "get", "ingress", s.name, "-n", s.namespace, "-o", "jsonpath={.spec.tls[0].secretName}")
	if issued := kubectl(t, "", "get", "certificate", secret, "-n", s.namespace, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"); issued != "True" {
		t.Errorf("cert-manager's Certificate %s/%s is not Ready: %q", s.namespace, secret, issued)
	}
}

// The same notebook behind a Gateway: the shadow's HTTPRoute attaches to the HTTPS listener of
// a Gateway of Traefik's, which admits routes from shadow namespaces alone and serves the
// wildcard certificate cert-manager issued for the domain. The URL is reported once the
// Gateway has accepted the route. A namespace-only tenant allowed HTTPRoutes and Gateways can
// make neither for a host under the domain.
func TestTheFrontDoorServesTheNotebookThroughAGateway(t *testing.T) {
	const ns = "gateway-user"
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ca := startCertManagerCA(ctx, t)
	controller := startTraefik(ctx, t)
	startGateway(t)
	withFrontDoor(t, fmt.Sprintf("FrontDoor: {Kind: HTTPRoute, Gateway: {Name: %s, Namespace: %s, SectionName: https}}\n", frontDoorGateway, frontDoorNS))

	s, host, served := reachThroughFrontDoor(t, ns, ca, controller)
	if !slices.Equal(served.DNSNames, []string{"*." + frontDoorDomain}) {
		t.Errorf("the certificate served for %s names %v: want the Gateway's wildcard", host, served.DNSNames)
	}
	route := kubectl(t, "", "get", "httproute", s.name+"-8888", "-n", s.namespace, "-o", "jsonpath={.spec.hostnames[0]}")
	if route != host {
		t.Errorf("the shadow's HTTPRoute is for %q, want %s", route, host)
	}

	const tenant = "gateway-tenant"
	kubectl(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: httproutes, namespace: %[1]s}
rules: [{apiGroups: [gateway.networking.k8s.io], resources: [httproutes, gateways], verbs: [create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: httproutes, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: httproutes}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: %[2]s}]
`, ns, tenant), "apply", "-f", "-")
	claim := func(hostname string) harness.Result {
		return site.kubectl.Run(ctx, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mine, namespace: %s}
spec:
  parentRefs: [{name: %s, namespace: %s, sectionName: https}]
  hostnames: [%q]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`, ns, frontDoorGateway, frontDoorNS, hostname), "--as="+tenant, "create", "--dry-run=server", "-f", "-")
	}
	for _, h := range []string{host, "*.site.test"} {
		if r := claim(h); r.Err == nil || !strings.Contains(r.Stderr, "ValidatingAdmissionPolicy 'shadowgate-front-door-hosts'") {
			t.Errorf("the tenant's HTTPRoute for %s: %v\n%s", h, r.Err, r.Output())
		}
	}
	if r := claim("web.tenant.example.net"); r.Err != nil {
		t.Errorf("the tenant's HTTPRoute outside the domain was refused: %s", r.Output())
	}
	// Nor a Gateway of its own with a listener for a host under the domain.
	gateway := fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: mine, namespace: %s}
spec:
  gatewayClassName: e2e-traefik
  listeners: [{name: https, port: %d, protocol: HTTPS, hostname: %q, tls: {certificateRefs: [{name: mine-tls}]}}]
`, ns, frontDoorPort, host)
	if r := site.kubectl.Run(ctx, gateway, "--as="+tenant, "create", "--dry-run=server", "-f", "-"); r.Err == nil ||
		!strings.Contains(r.Stderr, "ValidatingAdmissionPolicy 'shadowgate-front-door-hosts'") {
		t.Errorf("the tenant's Gateway for %s: %v\n%s", host, r.Err, r.Output())
	}
}

// reachThroughFrontDoor offloads a notebook into ns and fetches its page from this machine at
// the URL its TunnelReady Event printed, over HTTPS through the controller's pod at
// frontDoorPort, trusting ca alone; it returns the pod's shadow, the URL's host and the
// certificate served for it, verified for the host.
func reachThroughFrontDoor(t *testing.T, ns string, ca *x509.CertPool, controller string) (shadow, string, *x509.Certificate) {
	t.Helper()
	uid, s, _ := startOffloaded(t, ns, offloadedPod(ns, harness.HPCNode, nil))
	waitForJob(t, uid, "RUNNING", 2*time.Minute)
	s.readyPod(t, 3*time.Minute)
	ready := waitForTunnelEvent(t, failureBound, ns, "notebook", "TunnelReady", "https://")
	url := kubectl(t, "", "get", "tunnel", "notebook", "-n", ns, "-o", "jsonpath={.status.urls[0]}")
	host := strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/")
	if !strings.HasSuffix(host, "."+frontDoorDomain) || !strings.Contains(ready.Message, url) {
		t.Fatalf("the Tunnel's URL %q is not under %s, or TunnelReady does not print it: %q", url, frontDoorDomain, ready.Message)
	}

	// The host resolves the wildcard domain to the controller, as the site's DNS would.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(controller, fmt.Sprint(frontDoorPort)))
		},
	}}
	var served *x509.Certificate
	waitFor(t, 3*time.Minute, "the notebook's page at "+url+" through the ingress controller", func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "stand-in notebook for pod "+ns+"/notebook") {
			return fmt.Errorf("%s: %s %q", url, resp.Status, body)
		}
		served = resp.TLS.PeerCertificates[0]
		return nil
	})
	if err := served.VerifyHostname(host); err != nil || served.Issuer.CommonName != frontDoorIssuer+" CA" {
		t.Errorf("the certificate served for %s is for %v, issued by %q (%v); want one for the host from %s CA",
			host, served.DNSNames, served.Issuer.CommonName, err, frontDoorIssuer)
	}
	return s, host, served
}

// startCertManagerCA runs cert-manager's controllers for the test with a ClusterIssuer,
// frontDoorIssuer, whose CA cert-manager made itself, and returns that CA as a pool.
func startCertManagerCA(ctx context.Context, t *testing.T) *x509.CertPool {
	t.Helper()
	cm, err := harness.BuildCertManager(site.root, nil)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := cm.Start(ctx, site.kubectl, site.cp, site.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Stop() })
	kubectl(t, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: %[1]s-selfsigned}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: %[1]s-ca, namespace: kube-system}
spec:
  isCA: true
  commonName: %[1]s CA
  secretName: %[1]s-ca
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {kind: ClusterIssuer, name: %[1]s-selfsigned}
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: %[1]s}
spec: {ca: {secretName: %[1]s-ca}}
`, frontDoorIssuer), "apply", "-f", "-")
	kubectl(t, "", "wait", "--for=condition=Ready", "--timeout=2m", "clusterissuer/"+frontDoorIssuer)
	pem, err := base64.StdEncoding.DecodeString(kubectl(t, "", "get", "secret", frontDoorIssuer+"-ca", "-n", "kube-system", "-o", `jsonpath={.data.ca\.crt}`))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("the CA's Secret holds no certificate: %q", pem)
	}
	return pool
}

// startTraefik runs Traefik, built from its released module (hack/build-traefik.sh) into an
// image of the node's registry, as a Deployment on the cluster node serving on frontDoorPort
// the Ingresses of class frontDoorClass and the Gateways of its GatewayClass, and returns its
// pod's IP.
func startTraefik(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin, err := harness.BuildTraefik(site.root, nil)
	if err != nil {
		t.Fatal(err)
	}
	image, err := site.local.Node.PushBinaryImage(ctx, bin, "e2e/traefik:1")
	if err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: traefik, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-traefik}
rules:
- apiGroups: [""]
  resources: [services, endpoints, secrets, nodes]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses, ingressclasses]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses/status]
  verbs: [update]
- apiGroups: [""]
  resources: [namespaces, configmaps]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses, gateways, httproutes, grpcroutes, referencegrants, backendtlspolicies]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses/status, gateways/status, httproutes/status, grpcroutes/status, backendtlspolicies/status]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-traefik}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-traefik}
subjects: [{kind: ServiceAccount, name: traefik, namespace: %[1]s}]
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: %[2]s}
spec: {controller: traefik.io/ingress-controller}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: traefik, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: traefik}}
  template:
    metadata: {labels: {app: traefik}}
    spec:
      serviceAccountName: traefik
      nodeSelector: {kubernetes.io/hostname: %[3]s}
      securityContext: {runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534}
      containers:
      - name: traefik
        image: %[4]s
        args:
        - --global.checknewversion=false
        - --global.sendanonymoususage=false
        - --entrypoints.websecure.address=:%[5]d
        - --entrypoints.websecure.http.tls=true
        - --providers.kubernetesingress=true
        - --providers.kubernetesingress.ingressclass=%[2]s
        - --providers.kubernetesgateway=true
        ports: [{containerPort: %[5]d}]
        readinessProbe: {tcpSocket: {port: %[5]d}, periodSeconds: 1}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
`, frontDoorNS, frontDoorClass, harness.ClusterNode, image, frontDoorPort)
	kubectl(t, manifest, "apply", "-f", "-")
	t.Cleanup(func() {
		kubectl(t, "", "delete", "namespace", frontDoorNS, "--wait=true", "--timeout=2m")
		kubectl(t, "", "delete", "ingressclass", frontDoorClass, "--ignore-not-found")
		kubectl(t, "", "delete", "clusterrolebinding,clusterrole", "e2e-traefik", "--ignore-not-found")
	})
	kubectl(t, "", "rollout", "status", "-n", frontDoorNS, "deployment/traefik", "--timeout=3m")
	return kubectl(t, "", "get", "pods", "-n", frontDoorNS, "-l", "app=traefik", "-o", "jsonpath={.items[0].status.podIP}")
}

// startGateway makes Traefik's GatewayClass and Gateway frontDoorGateway: one HTTPS listener,
// https, on frontDoorPort for *.frontDoorDomain, with a wildcard certificate cert-manager issues
// from frontDoorIssuer, admitting routes from shadow namespaces alone; it waits until Traefik
// has accepted the Gateway.
func startGateway(t *testing.T) {
	t.Helper()
	kubectl(t, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: e2e-traefik}
spec: {controllerName: traefik.io/gateway-controller}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: wildcard, namespace: %[1]s}
spec:
  secretName: wildcard-tls
  dnsNames: ["*.%[2]s"]
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {kind: ClusterIssuer, name: %[3]s}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %[4]s, namespace: %[1]s}
spec:
  gatewayClassName: e2e-traefik
  listeners:
  - name: https
    port: %[5]d
    protocol: HTTPS
    hostname: "*.%[2]s"
    tls: {mode: Terminate, certificateRefs: [{name: wildcard-tls}]}
    allowedRoutes:
      namespaces:
        from: Selector
        selector: {matchExpressions: [{key: interlink.eu/shadow-namespace-for, operator: Exists}]}
`, frontDoorNS, frontDoorDomain, frontDoorIssuer, frontDoorGateway, frontDoorPort), "apply", "-f", "-")
	t.Cleanup(func() { kubectl(t, "", "delete", "gatewayclass", "e2e-traefik", "--ignore-not-found") })
	kubectl(t, "", "wait", "--for=condition=Ready", "--timeout=2m", "-n", frontDoorNS, "certificate/wildcard")
	kubectl(t, "", "wait", "--for=condition=Accepted", "--timeout=2m", "-n", frontDoorNS, "gateway/"+frontDoorGateway)
}

// withFrontDoor opens the front door of the site's hpc node under frontDoorDomain, with the
// Network lines door adds, until the test ends.
func withFrontDoor(t *testing.T, door string) {
	t.Helper()
	hpcBlock := "  " + harness.HPCNode + ":\n    Network:\n      EnableTunnel: true\n      ShadowMode: ssh\n"
	if !strings.Contains(site.local.Policy, hpcBlock) {
		t.Fatalf("the site's policy has no block %q", hpcBlock)
	}
	lines := fmt.Sprintf("      WildcardDNS: %q\n", "*."+frontDoorDomain)
	for line := range strings.Lines(door) {
		lines += "      " + line
	}
	t.Cleanup(func() {
		kubectl(t, harness.PolicyConfigMap(site.local.Policy), "apply", "--server-side", "--force-conflicts", "--field-manager=e2e-install", "-f", "-")
	})
	kubectl(t, harness.PolicyConfigMap(strings.Replace(site.local.Policy, hpcBlock, hpcBlock+lines, 1)),
		"apply", "--server-side", "--force-conflicts", "--field-manager=e2e-install", "-f", "-")
	// The webhook judges by the policy it read last: it admits a pod that narrows the front
	// door's ports only once the node has one.
	probe := offloadedPodNamed("default", "front-door-probe", harness.HPCNode, 8888, map[string]string{validate.AnnotationFrontDoorPorts: "8888"})
	waitFor(t, time.Minute, "the policy with the front door in force", func() error {
		_, err := site.kubectl.Must(context.Background(), probe, "apply", "--dry-run=server", "-f", "-")
		return err
	})
}
