package webhook

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/inject/goldencase"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// goldenPod is a pod of inject's golden cases, as the API server would send it, and its policy.
type goldenPod struct {
	pol *policy.Policy
	raw []byte
}

func goldenPods(t *testing.T) map[string]goldenPod {
	t.Helper()
	cases, err := goldencase.Read("../inject/testdata")
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]goldenPod{}
	for _, c := range cases {
		raw, err := yaml.YAMLToJSON(c.PodYAML)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		pods[c.Name+".yaml"] = goldenPod{c.Policy, raw}
	}
	return pods
}
