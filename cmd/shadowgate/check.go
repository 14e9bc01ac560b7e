package main

import (
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/interlink-hq/shadowgate/validate"
)

type checkOptions struct{ inputOptions }

func newCheckCommand() *cobra.Command {
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "check --policy FILE -f FILE|- [-f ...]",
		Short: "Judge objects exactly as the webhook would, without a cluster",
		Long: `Judge Pods, pod templates of workloads (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
CronJob), node ConfigMaps and the policy ConfigMap exactly as the admission webhook would.
Exit 0: all admitted. Exit 1: at least one refused. Exit 2: unreadable input or invalid policy.`,
		Example: `  shadowgate check --policy manifests/examples/policy.yaml -f manifests/examples/trainer.yaml
  kubectl get pod trainer -o yaml | shadowgate check --policy policy.yaml -f - -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	cmd.AddCommand(newCheckInstallCommand())
	o.addFlags(cmd, "objects to judge: multi-document YAML or JSON; - reads standard input", "namespace for objects that name none", "text", "json")
	return cmd
}

func (o *checkOptions) run(cmd *cobra.Command) error {
	cfg, objs, err := o.load(cmd)
	if err != nil {
		return err
	}
	// The Namespace objects among the input give their labels to the objects in them, which a
	// virtual node's AllowedNamespaceSelector matches; any other namespace is known by its
	// name alone (the label kubernetes.io/metadata.name).
	nsLabels := map[string]map[string]string{}
	for _, in := range objs {
		if ns, ok := in.obj.(*corev1.Namespace); ok {
			nsLabels[ns.Name] = ns.Labels
		}
	}
	results := make([]result, 0, len(objs))
	denied := false
	for _, in := range objs {
		r := result{Kind: in.kind, Namespace: in.ns, Name: in.name, Warnings: []string{}}
		var d validate.Decision
		judged := false
		if in.obj != nil {
			cfg.NamespaceLabels = nsLabels[in.ns]
			d, judged = validate.Object(in.obj, cfg)
		}
		if !judged {
			d.Warnings = append(d.Warnings, "shadowgate does not judge "+in.kind+" objects")
		}
		r.Allowed, r.errs, r.Errors = d.Allowed(), d.Errors, toFieldErrors(d.Errors)
		r.Warnings = append(r.Warnings, d.Warnings...)
		denied = denied || !r.Allowed
		results = append(results, r)
	}
	if o.output == "json" {
		if err := writeJSON(cmd.OutOrStdout(), map[string]any{"results": results}); err != nil {
			return err
		}
	} else {
		writeText(cmd.OutOrStdout(), results)
	}
	if denied {
		return &exitError{code: exitDenied}
	}
	return nil
}
