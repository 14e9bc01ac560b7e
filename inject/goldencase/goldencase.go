package goldencase

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Case is one golden case: its name (the file's, without .yaml), its policy, parsed and as
// written, and its Pod as written.
type Case struct {
	Name       string
	Policy     *policy.Policy
	PolicyYAML []byte
	PodYAML    []byte
}

// Read reads every case in dir (inject's testdata), failing on a file that is not a valid
// policy, ---, and a Pod, or on a directory that holds none.
func Read(dir string) ([]Case, error) {
	inputs, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var cases []Case
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden.yaml") {
			continue
		}
		data, err := os.ReadFile(in)
		if err != nil {
			return nil, err
		}
		policyDoc, podDoc, ok := bytes.Cut(data, []byte("\n---\n"))
		if !ok {
			return nil, fmt.Errorf("%s: want a policy document, ---, and a Pod", in)
		}
		pol, errs := validate.ParsePolicy(policyDoc, validate.CredentialRules{})
		if len(errs) > 0 {
			return nil, fmt.Errorf("%s: policy refused: %v", in, errs.ToAggregate())
		}
		cases = append(cases, Case{Name: strings.TrimSuffix(filepath.Base(in), ".yaml"), Policy: pol, PolicyYAML: policyDoc, PodYAML: podDoc})
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("no golden cases in %s", dir)
	}
	return cases, nil
}
