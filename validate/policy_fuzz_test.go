package validate_test

import (
	"os"
	"testing"

	"github.com/interlink-hq/shadowgate/validate"
)

// FuzzParse feeds arbitrary documents to the strict decoder: it must never panic, and a policy
// it accepts must validate again unchanged (decoding and validation agree).
func FuzzParsePolicy(f *testing.F) {
	if example, err := os.ReadFile("../manifests/examples/policy.yaml"); err == nil {
		f.Add(string(example))
	}
	for _, seed := range []string{
		sshNode(""), sshNode("Port: \"22\"\nExtraOptions: [1, {a: b}]\n"), "virtualNodes: []\n",
		"virtualNodes:\n  x: [1]\n", "- a\n- b\n", "virtualNodes: {a: {Network: {SSH: {Reverse: 5}}}}\n", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		p, errs := validate.ParsePolicy([]byte(doc), validate.CredentialRules{})
		if len(errs) > 0 {
			return
		}
		if again := validate.Policy(p, validate.CredentialRules{}, nil); len(again) > 0 {
			t.Fatalf("accepted policy fails validation: %v", again)
		}
	})
}
