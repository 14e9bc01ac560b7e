package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/interlink-hq/shadowgate/inject"
	"github.com/interlink-hq/shadowgate/internal/printable"
)

type renderOptions struct {
	inputOptions
	podUID string
}

func newRenderCommand() *cobra.Command {
	var o renderOptions
	cmd := &cobra.Command{
		Use:   "render --policy FILE -f FILE|-",
		Short: "Print what the webhook would do to one Pod: the mutated Pod and its shadow",
		Long: `Print what the webhook would do to one Pod: the mutated Pod first, then the shadow objects in
apply order (Namespace when one would be created, node ConfigMap, Service, Deployment).
Replicated credentials are left out: copying them needs the source objects. So is the scripts
ConfigMap (shadowgate-scripts-<hash>) the Deployment mounts: like the credential copies it is
shared by every shadow of the namespace and written beside them, it is the same for every pod,
and the name in the Deployment's "scripts" volume says which one. A pod that gets no
shadow prints only the Pod. The shadow's interlink.eu/pod-uid label and the front door's hosts,
which hash it, are computed from the Pod's metadata.uid or --pod-uid; without either they are
not the pod's, and a warning says so.
Exit 0: rendered. Exit 1: the pod is refused, with check's messages on standard error.
Exit 2: unreadable input, not exactly one Pod, or an invalid policy.`,
		Example: `  shadowgate render --policy manifests/examples/policy.yaml -f manifests/examples/notebook.yaml
  kubectl get pod notebook -o yaml | shadowgate render --policy policy.yaml -f - -o json
  shadowgate render --policy policy.yaml -f notebook.yaml --pod-uid "$(kubectl get pod notebook -o jsonpath='{.metadata.uid}')"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.addFlags(cmd, "the Pod to render, YAML or JSON; - reads standard input", "namespace for a Pod that names none", "yaml", "json")
	cmd.Flags().StringVar(&o.podUID, "pod-uid", "", "the pod's UID, for a Pod without metadata.uid: the shadow's interlink.eu/pod-uid label and the front door's hosts are computed from it")
	return cmd
}

func (o *renderOptions) run(cmd *cobra.Command) error {
	cfg, objs, err := o.load(cmd)
	if err != nil {
		return err
	}
	if len(objs) != 1 {
		return usageError("render takes exactly one Pod; got %d objects", len(objs))
	}
	pod, ok := objs[0].obj.(*corev1.Pod)
	if !ok {
		return usageError("render takes a Pod, not a %s; use check to judge other objects", objs[0].kind)
	}
	if pod.Name == "" {
		return usageError("the Pod has no metadata.name; the shadow is named after it (a generateName is resolved only when the API server creates the pod)")
	}
	if o.podUID != "" {
		if msgs := validation.IsValidLabelValue(o.podUID); len(msgs) > 0 {
			return usageError("--pod-uid %q is not a pod's UID: %s; give the pod's metadata.uid", o.podUID, strings.Join(msgs, "; "))
		}
		if pod.UID != "" && pod.UID != types.UID(o.podUID) {
			return usageError("--pod-uid %q differs from the Pod's metadata.uid %q: give one of them", o.podUID, pod.UID)
		}
		pod.UID = types.UID(o.podUID)
	}
	rendered := inject.Render(pod, cfg)
	d := rendered.Decision
	if !d.Allowed() {
		r := result{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, errs: d.Errors, Warnings: d.Warnings}
		writeText(cmd.ErrOrStderr(), []result{r})
		return &exitError{code: exitDenied}
	}
	out := []runtime.Object{rendered.Pod}
	if rendered.Shadow != nil {
		for _, obj := range rendered.Shadow.Objects() {
			out = append(out, obj)
		}
	}
	for _, w := range d.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s\n", printable.String(w))
	}
	if rendered.Shadow != nil && pod.UID == "" {
		what := "its shadow's " + inject.LabelPodUID + " label is empty"
		if rendered.Shadow.Ingress != nil || len(rendered.Shadow.HTTPRoutes) > 0 {
			what += " and its front door's hosts, which hash the UID, are not the ones the pod will have"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: the Pod has no metadata.uid: %s; give --pod-uid, or render the pod as stored (kubectl get pod NAME -o yaml)\n", what)
	}
	rendered.Pod.APIVersion, rendered.Pod.Kind = "v1", "Pod"
	return writeObjects(cmd.OutOrStdout(), o.output, out)
}

// writeObjects prints objects as a v1 List (json) or as YAML documents.
func writeObjects(w io.Writer, format string, objs []runtime.Object) error {
	if format == "json" {
		return writeJSON(w, map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
	}
	for i, obj := range objs {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}
