package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/interlink-hq/shadowgate/doctor"
	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

type doctorOptions struct {
	policyFile, output string
	nodes              []string
	in                 doctor.Input // the files and names every node is checked with
}

func newDoctorCommand() *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor --policy FILE [--node NAME ...]",
		Short: "Check a site from here as the shadow would reach it: login, host key, forwarding, Slurm, reverse hop",
		Long: `For each SSH virtual node of the policy (or those named with --node), log in to its login
node with the system's ssh and the shadow's own options, the credentials given as files, and
try what the shadow will need: the login host reachable, its host key, the login, TCP
forwarding or the exec connect command, a route to --compute-node, Slurm's squeue and srun, and
the reverse tunnel's hop to a node with SshdPath and PythonPath there. A check that needs a
flag not given is skipped naming it, never passed. Every failure comes with its remedy.
Exit 0: no check failed (skips and warnings allowed). Exit 1: a check failed. Exit 2: bad
flags, an unreadable file, a node that is unknown or not ShadowMode ssh.`,
		Example: "  shadowgate doctor --policy policy.yaml --key ~/.ssh/hpc_ed25519 --known-hosts hpc_known_hosts\n" +
			"  shadowgate doctor --policy policy.yaml --node hpc-vk --key id --known-hosts kh --compute-node node07 --port 8888 -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inputs, err := o.inputs(cmd)
			if err != nil {
				return err
			}
			var results []nodeChecks
			failed := false
			for _, in := range inputs {
				checks := doctor.Run(cmd.Context(), in)
				failed = failed || doctor.Failed(checks)
				results = append(results, nodeChecks{Node: in.Node, Login: loginOf(&in.Network.SSH), Checks: checks})
			}
			if o.output == "json" {
				if err := writeJSON(cmd.OutOrStdout(), map[string]any{"nodes": results}); err != nil {
					return err
				}
			} else {
				writeChecks(cmd.OutOrStdout(), results)
			}
			if failed {
				return &exitError{code: exitDenied}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.policyFile, "policy", "", "policy document, or a ConfigMap manifest holding it under data[policy.yaml]; - reads standard input")
	f.StringArrayVar(&o.nodes, "node", nil, "virtual node to check, repeatable (default: every SSH virtual node of the policy)")
	f.StringVar(&o.in.Key, "key", "", "private key file, the content of KeySecret (Auth publickey)")
	f.StringVar(&o.in.KnownHosts, "known-hosts", "", "known_hosts file, the content of KnownHostsConfigMap")
	f.StringVar(&o.in.Keytab, "keytab", "", "keytab file, the content of KeytabSecret (Auth kerberos)")
	f.StringVar(&o.in.Principal, "principal", "", "Kerberos principal kinit gets a ticket for (default: the policy's Principal)")
	f.StringVar(&o.in.Krb5Conf, "krb5-conf", "", "krb5.conf for kinit, the content of Krb5ConfigMap (default: the system's)")
	f.StringVar(&o.in.ComputeNode, "compute-node", "", "a compute node the login node should reach (with --port); the node hop of Reverse.NodeExec ssh")
	f.IntVar(&o.in.Port, "port", 0, "a port on --compute-node, as a pod's would be")
	f.StringVar(&o.in.Job, "job", "", "a running Slurm job of the login user, for the srun hop of Reverse.NodeExec srun")
	f.StringVar(&o.in.SocketDirRoot, "socket-dir-root", "", "the INTERLINK_SOCKET_DIR_ROOT the site's Slurm plugin exports to jobs (its CommandPrefix); default: none, as the plugin's default")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	_ = cmd.MarkFlagRequired("policy")
	return cmd
}

// inputs reads the policy and makes one checked Input per virtual node to check, refusing bad
// flags before anything is dialled.
func (o *doctorOptions) inputs(cmd *cobra.Command) ([]doctor.Input, error) {
	if o.output != "text" && o.output != "json" {
		return nil, usageError("--output must be text or json, not %q", o.output)
	}
	// Doctor judges the site, not what a serve may do with credentials: no credential flags.
	pol, err := loadPolicy(o.policyFile, cmd.InOrStdin(), validate.CredentialRules{})
	if err != nil {
		return nil, err
	}
	names := o.nodes
	if len(names) == 0 {
		for _, name := range pol.NodeNames() {
			if n := pol.VirtualNodes[name].Network; n.SSHShadow() {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			return nil, usageError("policy %s has no virtual node with ShadowMode ssh: nothing for doctor to check", o.policyFile)
		}
	}
	inputs := make([]doctor.Input, 0, len(names))
	for _, name := range names {
		vn, ok := pol.VirtualNodes[name]
		if !ok {
			return nil, usageError("--node %q: policy %s has no such virtual node; it has %v", name, o.policyFile, pol.NodeNames())
		}
		if slices.ContainsFunc(inputs, func(in doctor.Input) bool { return in.Node == name }) {
			continue
		}
		in := o.in
		in.Node, in.Network = name, vn.Network
		if err := doctor.Validate(&in); err != nil {
			return nil, usageError("%v", err)
		}
		inputs = append(inputs, in)
	}
	return inputs, nil
}

// nodeChecks is one virtual node's checks, as -o json lists them.
type nodeChecks struct {
	Node   string         `json:"node"`
	Login  string         `json:"login"`
	Checks []doctor.Check `json:"checks"`
}

func loginOf(s *policy.SSH) string {
	login := fmt.Sprintf("%s@%s:%d", s.User, s.LoginHost, s.Port)
	if s.Bastion.Host != "" {
		login += fmt.Sprintf(" through the bastion %s@%s:%d", s.BastionUser(), s.Bastion.Host, s.Bastion.Port)
	}
	return login
}

var statusMarks = map[doctor.Status]string{doctor.Pass: "✔", doctor.Fail: "✘", doctor.Warn: "!", doctor.Skip: "-"}

// writeChecks prints one line per check, its mark, name and detail, and under a failure or
// warning its remedy.
func writeChecks(w io.Writer, results []nodeChecks) {
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "virtual node %s (%s)\n", r.Node, r.Login)
		for _, c := range r.Checks {
			fmt.Fprintf(w, "  %s %s: %s\n", statusMarks[c.Status], c.Name, c.Detail)
			if c.Remedy != "" {
				fmt.Fprintf(w, "      %s\n", c.Remedy)
			}
		}
	}
}
