package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// inputOptions are the flags check and render share: the policy, the objects and how to print.
type inputOptions struct {
	policyFile string
	files      []string
	output     string
	namespace  string
	formats    []string // the first is the default
	// credentials are serve's flags, so objects are judged as that serve judges them.
	credentials credentialFlags
}

func (o *inputOptions) addFlags(cmd *cobra.Command, filesUsage, namespaceUsage string, formats ...string) {
	o.formats = formats
	cmd.Flags().StringVar(&o.policyFile, "policy", "", "policy document, or a ConfigMap manifest holding it under data[policy.yaml]")
	cmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, filesUsage)
	cmd.Flags().StringVarP(&o.output, "output", "o", formats[0], fmt.Sprintf("output format: %s or %s", formats[0], formats[1]))
	cmd.Flags().StringVar(&o.namespace, "namespace", "default", namespaceUsage)
	o.credentials.addFlags(cmd)
	_ = cmd.MarkFlagRequired("policy")
	_ = cmd.MarkFlagRequired("filename")
}

// load checks --output, then reads the policy and the objects. The policy ConfigMap is known
// by its default name, in any namespace: the CLI does not know where the webhook runs.
func (o *inputOptions) load(cmd *cobra.Command) (validate.Config, []inputObject, error) {
	if !slices.Contains(o.formats, o.output) {
		return validate.Config{}, nil, usageError("--output must be %s or %s, not %q", o.formats[0], o.formats[1], o.output)
	}
	rules := o.credentials.rules()
	pol, err := loadPolicy(o.policyFile, cmd.InOrStdin(), rules)
	if err != nil {
		return validate.Config{}, nil, err
	}
	objs, err := readObjects(o.files, o.namespace, cmd.InOrStdin())
	cfg := validate.Config{Policy: pol, PolicyRef: validate.PolicyRef{Name: policy.ConfigMapName}, Credentials: rules}
	return cfg, objs, err
}
