package tunnelstate

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/interlink-hq/shadowgate/internal/printable"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// Reason is why a tunnel is in its state: a token the shadow's scripts write at the head of a
// reason line (`<Reason>: <message>`), or one shadowgate finds itself (CredentialMissing).
type Reason string

// The reasons. The scripts' list is inject's ScriptReasons test's too: a token a script can
// write and this catalogue lacks fails there.
const (
	// Ready: every forwarded port opened a channel to the compute node, the reverse session
	// holds every forward, the ticket was renewed.
	ReasonReady Reason = "Ready"
	// Connecting: a tunnel container has started and not finished its first check.
	ReasonConnecting Reason = "Connecting"
	// NodeFound: wait-for-node's termination message on success, `NodeFound: <node>`.
	ReasonNodeFound Reason = "NodeFound"
	// WaitingForNode: the job is not running yet; the normal state while it is queued.
	ReasonWaitingForNode   Reason = "WaitingForNode"
	ReasonNodeWaitTimedOut Reason = "NodeWaitTimedOut"
	ReasonNoRunningJob     Reason = "NoRunningJob"
	// JobCompleted: Slurm has no running or waiting job named after the pod's UID, and every
	// one of that name that ended is COMPLETED: the job ran to its end, and the tunnel closed
	// with it. The tunnel is Ended, not Failed; nothing is to be done.
	ReasonJobCompleted Reason = "JobCompleted"
	// DuplicateJobName: Slurm runs more than one job named after the pod's UID, among the
	// site account's jobs. All pods of a virtual node share that account, so one may be a
	// co-tenant's, named so to receive the pod's traffic; discovery and the srun carrier
	// pick neither.
	ReasonDuplicateJobName Reason = "DuplicateJobName"
	ReasonLoginRefused     Reason = "LoginRefused"
	// KeyUnreadable: ssh could not use the key of KeySecret as the shadow's uid (the file's
	// mode or group keeps it out, or ssh finds it too open), so no login was tried with it:
	// the cluster's doing, not the login node's.
	ReasonKeyUnreadable         Reason = "KeyUnreadable"
	ReasonHostKeyUnknown        Reason = "HostKeyUnknown"
	ReasonHostKeyMismatch       Reason = "HostKeyMismatch"
	ReasonLoginUnreachable      Reason = "LoginUnreachable"
	ReasonForwardingProhibited  Reason = "ForwardingProhibited"
	ReasonNodeConnectionRefused Reason = "NodeConnectionRefused"
	ReasonNodeUnreachable       Reason = "NodeUnreachable"
	ReasonExecCommandMissing    Reason = "ExecCommandMissing"
	ReasonNodeHopRefused        Reason = "NodeHopRefused"
	ReasonKerberosFailed        Reason = "KerberosFailed"
	// TunnelDown: a failure the scripts do not recognise; the message carries what ssh said.
	ReasonTunnelDown Reason = "TunnelDown"
	// CredentialMissing: the shadow pod cannot start because a Secret or ConfigMap it mounts
	// is not in its namespace. Found by shadowgate from the pod's status, not by a script.
	ReasonCredentialMissing Reason = "CredentialMissing"
)

// ScriptReasons are the reasons a shadow script may write, in the order of the user guide's
// troubleshooting list.
var ScriptReasons = []Reason{
	ReasonReady, ReasonConnecting, ReasonNodeFound, ReasonWaitingForNode, ReasonNodeWaitTimedOut,
	ReasonNoRunningJob, ReasonJobCompleted, ReasonDuplicateJobName, ReasonLoginRefused, ReasonKeyUnreadable, ReasonHostKeyUnknown, ReasonHostKeyMismatch,
	ReasonLoginUnreachable, ReasonForwardingProhibited, ReasonNodeConnectionRefused,
	ReasonNodeUnreachable, ReasonExecCommandMissing, ReasonNodeHopRefused, ReasonKerberosFailed,
	ReasonTunnelDown,
}

// Known says whether r is in the catalogue: the reasons the scripts write and CredentialMissing.
func Known(r Reason) bool {
	if r == ReasonCredentialMissing {
		return true
	}
	for _, s := range ScriptReasons {
		if s == r {
			return true
		}
	}
	return false
}

// maxMessage bounds the message kept from a reason line: the scripts write at most 512
// bytes, and a termination message that falls back to the log can be longer.
const maxMessage = 512

var reasonLine = regexp.MustCompile(`^([A-Z][A-Za-z]+): (.*)$`)

// ParseReasonLine reads the first line of text as `<Reason>: <message>`. A line in another
// shape, or with a reason outside the catalogue, is TunnelDown with the line as its message,
// so what a container said is never lost, only not classified. The message is printable
// (printable.Cut to maxMessage): it goes into Events, the Tunnel and terminals.
func ParseReasonLine(text string) (Reason, string) {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.TrimSpace(line)
	if m := reasonLine.FindStringSubmatch(line); m != nil && Known(Reason(m[1])) {
		return Reason(m[1]), printable.Cut(m[2], maxMessage)
	}
	return ReasonTunnelDown, printable.Cut(line, maxMessage)
}

// Context is what a remedy names: the virtual node and its policy.
type Context struct {
	Node string
	SSH  policy.SSH
	// ShadowNamespace is where the shadow and its credentials live; Shadow is its
	// Deployment's name.
	ShadowNamespace, Shadow string
	// Ports are the forwarded ports.
	Ports []int32
}

// Remedy says, in the user guide's voice, what to do about a failure with reason r: who acts
// (the pod's owner or the cluster admin) and what they change. Empty for states that need
// nothing done.
func Remedy(r Reason, c Context) string {
	if note := bastionNote(r, c); note != "" {
		return remedy(r, c) + " " + note
	}
	return remedy(r, c)
}

// bastionNote is what Remedy adds for a login through SSH.Bastion, whose failures the shadow
// reports under the login's reasons, naming the bastion in the message.
func bastionNote(r Reason, c Context) string {
	s := c.SSH
	if s.Bastion.Host == "" {
		return ""
	}
	b := fmt.Sprintf("%s@%s:%d", s.BastionUser(), s.Bastion.Host, s.Bastion.Port)
	switch r {
	case ReasonHostKeyUnknown, ReasonHostKeyMismatch:
		return fmt.Sprintf("When the message names the bastion %s, its key is the one that belongs in ConfigMap %s (ssh-keyscan -p %d %s).", b, s.KnownHostsConfigMap, s.Bastion.Port, s.Bastion.Host)
	case ReasonLoginRefused, ReasonKerberosFailed:
		return fmt.Sprintf("When the message names the bastion %s, it is the bastion that refused: it must accept the same credential.", b)
	case ReasonLoginUnreachable:
		return fmt.Sprintf("The login goes through the bastion %s, which must be up, reachable from the cluster, and allow TCP forwarding to the login node.", b)
	}
	return ""
}

func remedy(r Reason, c Context) string {
	s := c.SSH
	login := fmt.Sprintf("%s@%s:%d", s.User, s.LoginHost, s.Port)
	switch r {
	case ReasonNodeWaitTimedOut:
		return fmt.Sprintf("The job has not started within NodeWaitTimeout (%s): check it with squeue --me on the login node; the shadow keeps retrying.", s.NodeWaitTimeout)
	case ReasonNoRunningJob:
		return "The pod's batch job is not running on the site: it ended, was cancelled, or was never submitted. Check the pod's status and the interLink plugin's log; delete and recreate the pod to run it again."
	case ReasonDuplicateJobName:
		return fmt.Sprintf("More than one running job of %s on %s is named after this pod's UID, and every pod of virtual node %s runs as that one account: one may be another tenant's, made to receive this pod's traffic. The shadow uses neither. The cluster admin cancels the job that is not the pod's (scancel, after checking with squeue --me on the login node), and gives tenants that need isolation a virtual node and User each, bound with AllowedNamespaces.", s.User, s.LoginHost, c.Node)
	case ReasonLoginRefused:
		if s.Auth == policy.AuthKerberos {
			return fmt.Sprintf("The login node refused the Kerberos ticket of %s for %s: the cluster admin checks that the principal may log in as %s (its .k5login) and that keytab Secret %s of virtual node %s holds it.", s.Principal, login, s.User, s.KeytabSecret, c.Node)
		}
		return fmt.Sprintf("The login node refused the key for %s: the cluster admin adds the public key of Secret %s (key %s) to %s's authorized_keys on %s, or fixes KeySecret for virtual node %s.", login, s.KeySecret, s.KeySecretKey, s.User, s.LoginHost, c.Node)
	case ReasonKeyUnreadable:
		return fmt.Sprintf("The shadow's user cannot read the key of Secret %s (key %s), or ssh finds it readable by others: the cluster admin checks that nothing on the cluster (a mutating webhook, a security context constraint) removed the shadow pod's fsGroup or changed the Secret volume's mode (0440, group-readable, owned by root), and that the shadow's uid has the pod's fsGroup or root's group.", s.KeySecret, s.KeySecretKey)
	case ReasonHostKeyUnknown:
		return fmt.Sprintf("ConfigMap %s holds no host key for %s: the cluster admin adds it (ssh-keyscan -p %d %s, checked against the site's published fingerprint).", s.KnownHostsConfigMap, s.LoginHost, s.Port, s.LoginHost)
	case ReasonHostKeyMismatch:
		return fmt.Sprintf("The login node's host key is not the one in ConfigMap %s: if the site changed its key, the cluster admin updates the ConfigMap from the site's published fingerprint; otherwise the connection may be intercepted. Do not turn host key checking off.", s.KnownHostsConfigMap)
	case ReasonLoginUnreachable:
		return fmt.Sprintf("The shadow cannot open an ssh session to %s: the login node is down or the cluster cannot reach it (firewall, DNS). The shadow retries by itself and reports when it recovers.", login)
	case ReasonForwardingProhibited:
		return fmt.Sprintf("The login node refuses TCP forwarding (AllowTcpForwarding no): the cluster admin sets ForwardMode: exec for virtual node %s, which relays through %s on the login node instead.", c.Node, s.ExecConnectCommand)
	case ReasonNodeConnectionRefused:
		return fmt.Sprintf("Nothing accepts connections on the pod's port%s on the compute node: make the server listen on 0.0.0.0, not 127.0.0.1 (for Jupyter: --ip=0.0.0.0), on the port the pod declares.", portList(c.Ports))
	case ReasonNodeUnreachable:
		return "The login node cannot reach the compute node: the site's admins check that login nodes may open connections to compute nodes on the pod's ports; with NodeDiscovery slurm, that Slurm's NodeAddr is an address the login node can dial."
	case ReasonExecCommandMissing:
		return fmt.Sprintf("ExecConnectCommand %q is not found on the login node: the cluster admin sets ExecConnectCommand for virtual node %s to a netcat the login node has (nc, ncat or an absolute path).", s.ExecConnectCommand, c.Node)
	case ReasonNodeHopRefused:
		if s.Reverse.NodeExec == "srun" {
			return "The login node could not reach the job through srun: the site's admins check that the login user may run srun --jobid into its own jobs (and --overlap is allowed)."
		}
		return fmt.Sprintf("The login node could not open an ssh session on the compute node for the reverse tunnel: the site's admins allow %s to ssh to the nodes of its own jobs, or the cluster admin sets Reverse.NodeExec: srun for virtual node %s.", s.User, c.Node)
	case ReasonKerberosFailed:
		return fmt.Sprintf("No Kerberos ticket for %s: the cluster admin checks that keytab Secret %s (key %s) holds that principal with current keys and that the KDC of ConfigMap %s is reachable from the cluster.", s.Principal, s.KeytabSecret, s.KeytabSecretKey, orNone(s.Krb5ConfigMap))
	case ReasonCredentialMissing:
		if !s.ReplicateCredentials {
			return fmt.Sprintf("ReplicateCredentials is false for virtual node %s, so the cluster admin creates it in namespace %s (or sets ReplicateCredentials: true to have shadowgate copy it).", c.Node, c.ShadowNamespace)
		}
		return fmt.Sprintf("shadowgate copies it into %s from its own namespace: the cluster admin checks it exists there.", c.ShadowNamespace)
	case ReasonTunnelDown:
		return fmt.Sprintf("The cluster admin reads the shadow's log (kubectl logs -n %s deploy/%s --all-containers) for the rest.", c.ShadowNamespace, c.Shadow)
	}
	return ""
}

func portList(ports []int32) string {
	if len(ports) == 0 {
		return ""
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p)
	}
	if len(s) == 1 {
		return " " + s[0]
	}
	return "s " + strings.Join(s, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none: the image's /etc/krb5.conf, which shadowgate's shadow image does not have: set Krb5ConfigMap)"
	}
	return s
}
