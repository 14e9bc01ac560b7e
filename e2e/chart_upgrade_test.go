package e2e

import (
	"encoding/base64"
	"strings"
	"testing"
)

// `helm install` as docs/install.md says, without cert-manager, then `helm upgrade`: the chart's
// self-signed CA and serving certificate are kept (read back with lookup), so the webhooks'
// caBundle keeps trusting what the running pods serve. There is no kubelet, so nothing runs and
// nothing calls the webhooks; Helm neither waits nor needs them. The install's notes warn that
// nothing authenticates the webhook's caller, naming both remedies, until clientCAConfigMap is
// set.
func TestChartUpgradeKeepsItsCertificate(t *testing.T) {
	c := newChartCluster(t)
	release := []string{"shadowgate", chartDir, "--namespace", "shadowgate-system", "--kubeconfig", c.k.Kubeconfig}
	const unauthenticated = "WARNING: the webhook does not authenticate its caller"
	notes := helm(t, append([]string{"install"}, release...)...)
	expectContains(t, notes, unauthenticated, "set clientCAConfigMap", "set networkPolicy.enabled=true")
	before := c.tlsState(t)
	notes = helm(t, append([]string{"upgrade", "--reuse-values", "--set", "logLevel=debug", "--set", "clientCAConfigMap=shadowgate-client-ca"}, release...)...)
	if strings.Contains(notes, unauthenticated) {
		t.Errorf("helm upgrade with clientCAConfigMap still warns of an unauthenticated caller:\n%s", notes)
	}
	after := c.tlsState(t)
	if before != after {
		t.Errorf("helm upgrade replaced the certificate or the caBundle:\nbefore %s\nafter  %s", before, after)
	}
	if args := c.must(t, "", "get", "deployment", "shadowgate", "-n", "shadowgate-system", "-o", "jsonpath={.spec.template.spec.containers[0].args}"); !strings.Contains(args, "--log-level=debug") {
		t.Errorf("the upgrade did not reach the Deployment: args %s", args)
	}
}

// With no replica serving, the policy can still be written back: its webhook,
// validate-policy, has failurePolicy Ignore (serve does not start without a policy, so under
// Fail a policy deleted then could only be restored by deleting the webhook configuration),
// while the node ConfigMap webhook beside it, at the same path, still refuses what it would
// have judged. `helm install` as above: nothing runs, so every call fails as it does once the
// last replica is gone.
func TestChartPolicyCanBeWrittenBackWhileNoReplicaServes(t *testing.T) {
	c := newChartCluster(t)
	helm(t, "install", "shadowgate", chartDir, "--namespace", "shadowgate-system", "--kubeconfig", c.k.Kubeconfig)
	c.must(t, "", "delete", "configmap", "shadowgate-policy", "-n", "shadowgate-system")
	policy := helmTemplate(t, "--show-only", "templates/policy.yaml")
	if r := c.run(t, policy, "create", "-f", "-"); r.Err != nil {
		t.Errorf("the deleted policy could not be written back while no replica serves:\n%s", r.Output())
	}
	node := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"shadow-x-node","namespace":"default",` +
		`"labels":{"interlink.eu/shadow-role":"node"}},"data":{"compute-node":"node1"}}`
	if r := c.run(t, node, "create", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, `failed calling webhook "validate-configmaps.shadowgate.interlink.eu"`) {
		t.Errorf("a node ConfigMap was not refused for the failed call while no replica serves (failurePolicy Fail):\n%s", r.Output())
	}
}

// tlsState is the serving certificate and CA in Secret shadowgate-tls and the caBundle of
// each webhook, after checking that the caBundles are that CA.
func (c *chartCluster) tlsState(t *testing.T) string {
	t.Helper()
	secret := c.must(t, "", "get", "secret", "shadowgate-tls", "-n", "shadowgate-system", "-o", `jsonpath={.data.ca\.crt} {.data.tls\.crt}`)
	ca, cert, _ := strings.Cut(secret, " ")
	if ca == "" || cert == "" {
		t.Fatalf("Secret shadowgate-tls lacks ca.crt or tls.crt: %q", secret)
	}
	for _, kind := range []string{"mutatingwebhookconfiguration", "validatingwebhookconfiguration"} {
		bundles := strings.Fields(c.must(t, "", "get", kind, "shadowgate", "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}"))
		if len(bundles) == 0 {
			t.Errorf("%s has no caBundle", kind)
		}
		for _, b := range bundles {
			if b != ca {
				pem, _ := base64.StdEncoding.DecodeString(b)
				t.Errorf("%s caBundle is not Secret shadowgate-tls's ca.crt:\n%s", kind, pem)
			}
		}
	}
	return secret
}
