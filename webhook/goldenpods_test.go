package webhook

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// goldenPod is a pod of inject's golden cases, as the API server would send it, and its policy.
type goldenPod struct {
	pol *policy.Policy
	raw []byte
}

func goldenPods(t *testing.T) map[string]goldenPod {
	t.Helper()
	files, err := filepath.Glob("../inject/testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]goldenPod{}
	for _, f := range files {
		if strings.HasSuffix(f, ".golden.yaml") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		policyDoc, podDoc, _ := bytes.Cut(data, []byte("\n---\n"))
		pol, errs := policy.Parse(policyDoc)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", f, errs.ToAggregate())
		}
		raw, err := yaml.YAMLToJSON(podDoc)
		if err != nil {
			t.Fatal(err)
		}
		pods[filepath.Base(f)] = goldenPod{pol, raw}
	}
	if len(pods) == 0 {
		t.Fatal("no golden pods in ../inject/testdata")
	}
	return pods
}
