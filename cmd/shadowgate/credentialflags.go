package main

import (
	"github.com/spf13/cobra"

	"github.com/interlink-hq/shadowgate/validate"
)

// credentialFlags are serve's two flags on what it may do with the site's credentials. check,
// render and policy check take them too, with the same defaults, so they judge as a serve run
// with the same flags does.
type credentialFlags struct {
	// replication is false where the ServiceAccount may not write Secrets.
	replication bool
	// inPodNamespaces lets shadow-same-ns pods have the site's Secret copied: off by default,
	// since the copy is readable by everyone who may create pods in that namespace.
	inPodNamespaces bool
}

func (c *credentialFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&c.replication, validate.CredentialReplicationFlag, true, "copy the credentials a virtual node's policy names into shadow namespaces (ReplicateCredentials); false where the ServiceAccount may not write Secrets, and a policy asking for replication is then refused")
	cmd.Flags().BoolVar(&c.inPodNamespaces, validate.CredentialsInPodNamespacesFlag, false, "UNSAFE with a site-wide key or keytab: copy the site's Secret into a pod's own namespace when it sets interlink.eu/shadow-same-ns, where its author can read it; false (the default) refuses such a pod or template on a node that replicates credentials")
}

func (c *credentialFlags) rules() validate.CredentialRules {
	return validate.CredentialRules{WithoutReplication: !c.replication, WithoutCopiesInPodNamespaces: !c.inPodNamespaces}
}
