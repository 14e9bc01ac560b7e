package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/interlink-hq/shadowgate/validate"
)

func newPolicyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with the per-virtual-node policy",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newPolicyCheckCommand())
	return cmd
}

func newPolicyCheckCommand() *cobra.Command {
	var file, output string
	var credentials credentialFlags
	cmd := &cobra.Command{
		Use:   "check --policy FILE",
		Short: "Validate a policy document or policy ConfigMap",
		Long: `Validate a policy as the webhook would at kubectl apply of its ConfigMap, including what
a serve run with the same --credential-replication cannot carry out.
Exit 0: valid. Exit 1: invalid. Exit 2: unreadable file or bad flags.`,
		Example: "  shadowgate policy check --policy manifests/examples/policy.yaml -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return usageError("--output must be text or json, not %q", output)
			}
			data, err := readFile(file, cmd.InOrStdin())
			if err != nil {
				return usageError("cannot read the policy: %v", err)
			}
			pol, errs := validate.ParsePolicy(data, credentials.rules())
			warnings := []string{}
			if pol != nil {
				warnings = append(warnings, validate.PolicyWarnings(pol, nil)...)
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				if err := writeJSON(out, map[string]any{"valid": len(errs) == 0, "errors": toFieldErrors(errs), "warnings": warnings}); err != nil {
					return err
				}
			} else if len(errs) == 0 {
				for _, w := range warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s\n", w)
				}
				fmt.Fprintf(out, "policy is valid: %d virtual node(s): %s\n", len(pol.VirtualNodes), strings.Join(pol.NodeNames(), ", "))
			} else {
				for _, e := range errs {
					fmt.Fprintln(out, e.Error())
				}
			}
			if len(errs) > 0 {
				return &exitError{code: exitDenied}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "policy", "", "policy document, or a ConfigMap manifest holding it under data[policy.yaml]; - reads standard input")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	credentials.addFlags(cmd)
	_ = cmd.MarkFlagRequired("policy")
	return cmd
}
