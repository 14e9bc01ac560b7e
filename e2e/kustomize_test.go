package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A kustomize overlay's namespace: and namePrefix: rename shadowgate's objects and every
// reference kustomize knows (the webhooks' Service, the RoleBindings' subjects), but not the
// strings inside other fields. Replacements cannot do it for the user: in the base or a
// component they run before the overlay renames anything. docs/install.md's flags section lists these
// strings beside --namespace; this test keeps that list complete.
func TestNamespaceOverlayLeavesOnlyTheDocumentedStrings(t *testing.T) {
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(cluster.root, "manifests/base"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf("resources: [%s]\nnamespace: hpc-admission\nnamePrefix: site-\n", base)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	var stale []string
	for key, o := range parseRendered(t, mustKubectl(t, "", "kustomize", dir)) {
		for field, v := range o.Object {
			stale = append(stale, stringsHolding(key+" "+field, v, "shadowgate-system")...)
		}
	}
	slices.Sort(stale)
	// docs/install.md, "Flags": the strings to patch beside --namespace.
	want := []string{
		"MutatingWebhookConfiguration/site-shadowgate webhooks[mutate-pods.shadowgate.interlink.eu].namespaceSelector.matchExpressions[0].values[1]",
		"ValidatingAdmissionPolicy/site-shadowgate-front-door-hosts spec.matchConditions[not-shadowgate-or-admin].expression",
		"ValidatingAdmissionPolicy/site-shadowgate-least-privilege spec.matchConditions[shadowgate-serviceaccount].expression",
		"ValidatingAdmissionPolicy/site-shadowgate-least-privilege spec.validations[1].expression",
		"ValidatingAdmissionPolicy/site-shadowgate-least-privilege spec.variables[frontDoorDomains].expression",
		"ValidatingAdmissionPolicy/site-shadowgate-shadow-namespace-marker spec.matchConditions[not-shadowgate-or-admin].expression",
		"ValidatingAdmissionPolicy/site-shadowgate-shadow-object-marks spec.matchConditions[not-shadowgate-or-admin].expression",
		"ValidatingAdmissionPolicyBinding/site-shadowgate-front-door-hosts spec.paramRef.namespace",
		"ValidatingWebhookConfiguration/site-shadowgate webhooks[validate-configmaps.shadowgate.interlink.eu].matchConditions[not-shadowgate-or-compute-node].expression",
		"ValidatingWebhookConfiguration/site-shadowgate webhooks[validate-pods.shadowgate.interlink.eu].namespaceSelector.matchExpressions[0].values[1]",
		"ValidatingWebhookConfiguration/site-shadowgate webhooks[validate-policy.shadowgate.interlink.eu].matchConditions[policy-configmap].expression",
		"ValidatingWebhookConfiguration/site-shadowgate webhooks[validate-policy.shadowgate.interlink.eu].namespaceSelector.matchExpressions[0].values[0]",
		"ValidatingWebhookConfiguration/site-shadowgate webhooks[validate-workloads.shadowgate.interlink.eu].matchConditions[not-shadowgate].expression",
		"ValidatingWebhookConfiguration/site-shadowgate webhooks[validate-workloads.shadowgate.interlink.eu].namespaceSelector.matchExpressions[0].values[1]",
	}
	if !slices.Equal(stale, want) {
		t.Errorf("after namespace: and namePrefix:, these still say shadowgate-system:\n%s\nwant (docs/install.md lists these):\n%s",
			strings.Join(stale, "\n"), strings.Join(want, "\n"))
	}
}

// stringsHolding returns the paths under at of the strings in v that contain s; a list
// element with a name is named by it, others by their index.
func stringsHolding(at string, v any, s string) []string {
	var found []string
	switch v := v.(type) {
	case string:
		if strings.Contains(v, s) {
			found = append(found, at)
		}
	case map[string]any:
		for k, e := range v {
			found = append(found, stringsHolding(at+"."+k, e, s)...)
		}
	case []any:
		for i, e := range v {
			index := fmt.Sprint(i)
			if m, ok := e.(map[string]any); ok && m["name"] != nil {
				index = fmt.Sprint(m["name"])
			}
			found = append(found, stringsHolding(fmt.Sprintf("%s[%s]", at, index), e, s)...)
		}
	}
	return found
}
