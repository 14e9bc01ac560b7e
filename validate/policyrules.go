package validate

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/policy"
	"github.com/interlink-hq/shadowgate/validate/syntax"
)

// refusal is why an ssh option may not be among ExtraOptions, and what to do instead.
type refusal struct{ why, instead string }

// refusedOptions say, by lower-case keyword, why the ssh options an admin is most likely to
// reach for are refused, where the allowlist (tuningOptions) would only say that they are not
// on it: each runs code, opens a listener or a path between the cluster and the site's network,
// sends the hops elsewhere, or takes effect over shadowgate's own host key, credential or
// connection handling.
var refusedOptions = func() map[string]refusal {
	m := map[string]refusal{}
	refuse := func(r refusal, keywords ...string) {
		for _, k := range keywords {
			m[k] = r
		}
	}
	refuse(refusal{"runs a command on the shadow's side", "to reach the login node through a jump host, set SSH.Bastion (Host, Port, User): shadowgate runs the hop itself, with the login's host key checking and credential"},
		"proxycommand")
	refuse(refusal{"runs a command on the shadow's side", "remove it"},
		"localcommand")
	refuse(refusal{"opens the jump hop with none of the options shadowgate sets: no pinned host key, no BatchMode, no key, so it fails in the shadow image or trusts a host nobody checked", "set SSH.Bastion (Host, Port, User) instead: shadowgate reaches the login node through it with the login's host key checking, BatchMode and credential on the hop too"},
		"proxyjump")
	refuse(refusal{"lets LocalCommand run a command on the shadow's side", "remove it"},
		"permitlocalcommand")
	refuse(refusal{"runs a command on the shadow's side to list host keys", "put the host keys in the ConfigMap KnownHostsConfigMap names"},
		"knownhostscommand")
	refuse(refusal{"replaces the command shadowgate runs on the login node", "remove it; to reach compute nodes through a command on the login node, use ForwardMode: exec and ExecConnectCommand"},
		"remotecommand")
	refuse(refusal{"names a program the shadow's ssh runs", "remove it: the shadow forwards no X11"},
		"xauthlocation")
	refuse(refusal{"loads a shared library into the shadow's ssh, which runs its code", "keep the key in the Secret KeySecret names"},
		"pkcs11provider", "smartcarddevice", "securitykeyprovider")
	refuse(refusal{"is a block of configuration, not one option, and Match exec runs a command on the shadow's side", "give the options themselves; they apply to every hop"},
		"match")
	refuse(refusal{"is a block of configuration, not one option, and ssh refuses it on its command line", "give the options themselves; they apply to every hop"},
		"host")
	refuse(refusal{"reads options from a file, where any option, a command among them, could hide", "give the options themselves; they apply to every hop"},
		"include")
	refuse(refusal{"opens a forward of its own, a path between the cluster and the site's network outside shadowgate's rules", "let pods ask for reverse forwards with interlink.eu/reverse-forwards; the shadow forwards the pod's ports itself"},
		"localforward", "remoteforward", "dynamicforward")
	refuse(refusal{"opens the shadow's forwards to other machines", "remove it: shadowgate binds each listener where it must"},
		"gatewayports")
	refuse(refusal{"changes where the reverse tunnel's SOCKS proxy may connect", "remove it: Reverse.AllowSocks decides whether pods get the proxy"},
		"permitremoteopen")
	refuse(refusal{"opens a tun device, a network path between the cluster and the site's network", "remove it"},
		"tunnel", "tunneldevice")
	refuse(refusal{"gives the login node a path back to an agent socket in the shadow", "remove it: the shadow logs in with KeySecret or the keytab"},
		"forwardagent")
	refuse(refusal{"opens an X11 channel from the login node into the shadow", "remove it"},
		"forwardx11")
	refuse(refusal{"sends every hop, to the login node and to the compute nodes, to that host instead", "set LoginHost; the shadow finds the compute node itself (NodeDiscovery)"},
		"hostname")
	refuse(refusal{"rewrites the names shadowgate dials, the login node's and the compute nodes', into other names", "give LoginHost as a full name"},
		"canonicalizehostname", "canonicaldomains", "canonicalizepermittedcnames")
	refuse(refusal{"checks every hop's host key against another host's entry", "list each host in KnownHostsConfigMap under the name shadowgate dials"},
		"hostkeyalias")
	refuse(refusal{"trusts host keys found outside KnownHostsConfigMap", "put the host keys in the ConfigMap KnownHostsConfigMap names"},
		"verifyhostkeydns", "nohostauthenticationforlocalhost")
	refuse(refusal{"adds a credential beside the one the policy names", "put the key in the Secret KeySecret names (Auth: publickey), or use Auth: kerberos"},
		"identityfile", "identityfile2", "certificatefile", "identityagent")
	refuse(refusal{"passes environment variables to the commands shadowgate runs on the login and compute nodes, where srun and squeue read SLURM_* variables as options", "remove it; set what the site needs in the login node's shell startup files"},
		"sendenv", "setenv")
	refuse(refusal{"shares connections between the shadow's ssh processes, which shadowgate manages itself", "remove it"},
		"controlmaster", "controlpath", "controlpersist")
	refuse(refusal{"removes the forwards shadowgate gives ssh, so the tunnel would carry nothing", "remove it"},
		"clearallforwardings")
	refuse(refusal{"changes how ssh runs the sessions shadowgate's scripts drive, so the tunnel would fail", "remove it"},
		"forkafterauthentication", "sessiontype", "stdinnull")
	return m
}()

// Policy returns every problem of a decoded, defaulted policy: the rules of each virtual node's
// options, then what the credential rules this shadowgate runs with cannot carry out. docPath
// prefixes the error paths; nil means the document is the root.
func Policy(p *policy.Policy, rules CredentialRules, docPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	nodesPath := policyChild(docPath, "virtualNodes")
	for _, name := range p.NodeNames() {
		nodePath := nodesPath.Key(name)
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(nodePath, name, "a virtual node is named by its node name: "+msg))
		}
		vn := p.VirtualNodes[name]
		errs = append(errs, validateNamespaceBinding(&vn, nodePath)...)
		errs = append(errs, validateNetwork(&vn.Network, nodePath.Child("Network"))...)
		errs = append(errs, rules.validateReplication(&vn.Network, nodePath.Child("Network"))...)
	}
	return errs
}

// ParsePolicy reads a policy document, or a ConfigMap manifest whose data[policy.yaml] holds
// one, as `shadowgate policy check` and the CLI's --policy do: decoded strictly, defaulted and
// judged by Policy. Error paths start at the document (virtualNodes[...]) whichever form it
// comes in. The policy is nil when there is any error.
func ParsePolicy(data []byte, rules CredentialRules) (*policy.Policy, field.ErrorList) {
	doc, docErrs := policy.Document(data)
	if len(docErrs) > 0 {
		return nil, docErrs
	}
	return validOnly(judgePolicy(doc, nil, rules))
}

// PolicyConfigMap reads the policy a policy ConfigMap holds, with error paths under
// data[policy.yaml] as kubectl shows them for the ConfigMap. The policy is nil when there is
// any error.
func PolicyConfigMap(cm *corev1.ConfigMap, rules CredentialRules) (*policy.Policy, field.ErrorList) {
	return validOnly(judgePolicyConfigMap(cm, rules))
}

func judgePolicyConfigMap(cm *corev1.ConfigMap, rules CredentialRules) (*policy.Policy, field.ErrorList) {
	docPath := field.NewPath("data").Key(policy.DataKey)
	doc, ok := cm.Data[policy.DataKey]
	if !ok {
		return nil, field.ErrorList{field.Required(docPath, "the policy ConfigMap must hold the policy document under this key")}
	}
	return judgePolicy([]byte(doc), docPath, rules)
}

// judgePolicy decodes a policy document and judges it, every error of both reported at once.
// The policy is what could be decoded, errors or not, for the warnings it carries.
func judgePolicy(doc []byte, docPath *field.Path, rules CredentialRules) (*policy.Policy, field.ErrorList) {
	pol, errs := policy.Decode(doc, docPath)
	if pol != nil {
		errs = append(errs, Policy(pol, rules, docPath)...)
	}
	return pol, errs
}

// validOnly is a judged policy as callers get it: nil when there is any error.
func validOnly(pol *policy.Policy, errs field.ErrorList) (*policy.Policy, field.ErrorList) {
	if len(errs) > 0 {
		return nil, errs
	}
	return pol, nil
}

func policyChild(parent *field.Path, name string) *field.Path {
	if parent == nil {
		return field.NewPath(name)
	}
	return parent.Child(name)
}

func validateNetwork(n *policy.Network, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch n.ShadowMode {
	case policy.ShadowModeWstunnel:
		errs = append(errs, frontDoorWithoutPorts(n, p)...)
	case policy.ShadowModeSSH:
		if n.FullMesh {
			errs = append(errs, field.Invalid(p.Child("FullMesh"), true,
				"the SSH shadow cannot be combined with full mesh: the mesh needs the compute node to dial out to the cluster, "+
					"which is what the SSH shadow exists to avoid; set FullMesh: false and use the reverse tunnel (SSH.Reverse) for pod-to-cluster traffic, or use ShadowMode: wstunnel"))
		}
		errs = append(errs, validateSSH(&n.SSH, p.Child("SSH"))...)
		if n.EnableTunnel {
			errs = append(errs, validateFrontDoor(n, p)...)
		} else {
			errs = append(errs, frontDoorWithoutPorts(n, p)...)
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("ShadowMode"), n.ShadowMode, []string{policy.ShadowModeWstunnel, policy.ShadowModeSSH}))
	}
	return errs
}

func validateSSH(s *policy.SSH, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.LoginHost == "" {
		errs = append(errs, field.Required(p.Child("LoginHost"), "the SSH shadow needs the login node to dial in to"))
	} else if ok, why := syntax.Host(s.LoginHost, syntax.DialedByShadow); !ok {
		errs = append(errs, field.Invalid(p.Child("LoginHost"), s.LoginHost,
			why+"; give the login node's hostname (login.hpc.example.org) or IP address"))
	}
	if s.User == "" {
		errs = append(errs, field.Required(p.Child("User"), "the SSH shadow needs the login name on the login node"))
	} else {
		errs = append(errs, validateUser(p.Child("User"), s.User)...)
	}
	errs = append(errs, validatePort(p.Child("Port"), s.Port)...)
	errs = append(errs, validateBastion(s, p.Child("Bastion"))...)
	if !syntax.Image(s.Image) {
		errs = append(errs, field.Invalid(p.Child("Image"), s.Image, "must be a container image reference such as ghcr.io/interlink-hq/shadowgate/shadow:0.1.0"))
	}
	errs = append(errs, validateAuth(s, p)...)
	switch s.ForwardMode {
	case policy.ForwardModePortForward:
	case policy.ForwardModeExec:
		if ok, why := syntax.ConnectCommand(s.ExecConnectCommand); !ok {
			errs = append(errs, field.Invalid(p.Child("ExecConnectCommand"), s.ExecConnectCommand, why+
				"; it runs on the login node as <command> <node> <port>, so it must be nc, ncat or netcat (by name or absolute path) with at most -N, -q N and -w N, such as nc, \"nc -N\", \"nc -q 1\" or /usr/bin/ncat"))
		}
		errs = append(errs, validateExecPool(s, p)...)
	default:
		errs = append(errs, field.NotSupported(p.Child("ForwardMode"), s.ForwardMode, []string{policy.ForwardModePortForward, policy.ForwardModeExec}))
	}
	errs = append(errs, objectName(p.Child("Krb5ConfigMap"), s.Krb5ConfigMap, "ConfigMap")...)
	errs = append(errs, objectName(p.Child("KnownHostsConfigMap"), s.KnownHostsConfigMap, "ConfigMap")...)
	if d, err := time.ParseDuration(s.NodeWaitTimeout); err != nil {
		errs = append(errs, field.Invalid(p.Child("NodeWaitTimeout"), s.NodeWaitTimeout, "must be a Go duration such as 2h or 90m"))
	} else if d <= 0 {
		errs = append(errs, field.Invalid(p.Child("NodeWaitTimeout"), s.NodeWaitTimeout, "must be positive: it is how long the shadow waits for the batch system to place the job"))
	}
	switch s.NodeDiscovery {
	case policy.NodeDiscoveryConfigMap, policy.NodeDiscoverySlurm:
	default:
		errs = append(errs, field.NotSupported(p.Child("NodeDiscovery"), s.NodeDiscovery,
			[]string{policy.NodeDiscoverySlurm, policy.NodeDiscoveryConfigMap}))
	}
	for i, opt := range s.ExtraOptions {
		errs = append(errs, validateExtraOption(p.Child("ExtraOptions").Index(i), opt)...)
	}
	return append(errs, validateReverse(&s.Reverse, p.Child("Reverse"))...)
}

// validateBastion judges the jump host by the rules of the login node it stands in front of:
// the one host rule (syntax.Host, dialled by the shadow like LoginHost), the login name rule
// and a TCP port. Port and User without Host are refused rather than ignored, since the admin
// who wrote them expects a bastion.
func validateBastion(s *policy.SSH, p *field.Path) field.ErrorList {
	b := s.Bastion
	if b.Host == "" {
		if b.User != "" || b.Port != policy.Defaults().Network.SSH.Bastion.Port {
			return field.ErrorList{field.Required(p.Child("Host"), "Bastion.Port and Bastion.User need the bastion's Host; remove them to reach the login node directly")}
		}
		return nil
	}
	var errs field.ErrorList
	if ok, why := syntax.Host(b.Host, syntax.DialedByShadow); !ok {
		errs = append(errs, field.Invalid(p.Child("Host"), b.Host,
			why+"; give the bastion's hostname (bastion.hpc.example.org) or IP address"))
	}
	errs = append(errs, validatePort(p.Child("Port"), b.Port)...)
	if b.User != "" {
		errs = append(errs, validateUser(p.Child("User"), b.User)...)
	}
	return errs
}

func validateUser(p *field.Path, user string) field.ErrorList {
	if syntax.UserName(user) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, user,
		"a login name has only letters, digits, '_', '.' and '-', does not start with '-' or '.', and has at most 64 characters")}
}

// Bounds of exec mode's pool of logins: one login carries ExecSessionsPerLogin - 1 relayed
// connections (one channel is kept for the tunnel's checks), and a login node is never
// asked for more than maxExecLogins logins by one shadow.
const (
	minExecSessions = 2
	maxExecSessions = 1000
	maxExecLogins   = 16
)

func validateExecPool(s *policy.SSH, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.ExecSessionsPerLogin < minExecSessions || s.ExecSessionsPerLogin > maxExecSessions {
		errs = append(errs, field.Invalid(p.Child("ExecSessionsPerLogin"), s.ExecSessionsPerLogin, fmt.Sprintf(
			"must be between %d and %d: set it to the login node's sshd MaxSessions (10 unless its sshd_config says otherwise)", minExecSessions, maxExecSessions)))
	}
	if s.ExecMaxLogins < 1 || s.ExecMaxLogins > maxExecLogins {
		errs = append(errs, field.Invalid(p.Child("ExecMaxLogins"), s.ExecMaxLogins, fmt.Sprintf(
			"must be between 1 and %d: it is how many logins one shadow may hold on the login node at once", maxExecLogins)))
	}
	return errs
}

func validatePort(p *field.Path, port int) field.ErrorList {
	if port < 1 || port > 65535 {
		return field.ErrorList{field.Invalid(p, port, "must be a TCP port between 1 and 65535")}
	}
	return nil
}

func validateAuth(s *policy.SSH, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Auth {
	case policy.AuthPublicKey:
		if s.KeySecret == "" {
			errs = append(errs, field.Required(p.Child("KeySecret"), "publickey authentication needs the Secret holding the private key"))
		}
		errs = append(errs, objectName(p.Child("KeySecret"), s.KeySecret, "Secret")...)
		errs = append(errs, dataKey(p.Child("KeySecretKey"), s.KeySecretKey)...)
	case policy.AuthKerberos:
		if s.KeytabSecret == "" {
			errs = append(errs, field.Required(p.Child("KeytabSecret"), "kerberos authentication needs the Secret holding the keytab"))
		}
		errs = append(errs, objectName(p.Child("KeytabSecret"), s.KeytabSecret, "Secret")...)
		errs = append(errs, dataKey(p.Child("KeytabSecretKey"), s.KeytabSecretKey)...)
		if s.Principal == "" {
			errs = append(errs, field.Required(p.Child("Principal"), "kerberos authentication needs the principal to kinit as, such as alice@EXAMPLE.ORG"))
		} else if !syntax.Principal(s.Principal) {
			errs = append(errs, field.Invalid(p.Child("Principal"), s.Principal, "must be a Kerberos principal such as alice@EXAMPLE.ORG, without spaces or quotes"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("Auth"), s.Auth, []string{policy.AuthPublicKey, policy.AuthKerberos}))
	}
	return errs
}

func validateReverse(r *policy.Reverse, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.NodeExec != policy.NodeExecSSH && r.NodeExec != policy.NodeExecSrun {
		errs = append(errs, field.NotSupported(p.Child("NodeExec"), r.NodeExec, []string{policy.NodeExecSSH, policy.NodeExecSrun}))
	}
	if r.Sshd != policy.SshdNode && r.Sshd != policy.SshdUserspace {
		errs = append(errs, field.NotSupported(p.Child("Sshd"), r.Sshd, []string{policy.SshdNode, policy.SshdUserspace}))
	}
	if !strings.HasPrefix(r.SshdPath, "/") || !syntax.Program(r.SshdPath) {
		errs = append(errs, field.Invalid(p.Child("SshdPath"), r.SshdPath, "must be the absolute path of sshd on the compute node, such as /usr/sbin/sshd"))
	}
	if !syntax.Program(r.PythonPath) {
		errs = append(errs, field.Invalid(p.Child("PythonPath"), r.PythonPath, "must be a command name or absolute path such as python3 or /usr/bin/python3"))
	}
	return append(errs, validateAllowedDestinations(&r.AllowedDestinations, p.Child("AllowedDestinations"))...)
}

// validateAllowedDestinations holds each entry to what the destination rule and the shadow's
// NetworkPolicy can express: namespace names, DNS suffixes outside the cluster's own names, and
// CIDRs written masked.
func validateAllowedDestinations(a *policy.AllowedDestinations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ns := range a.Namespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(p.Child("Namespaces").Index(i), ns, "must be a namespace name: "+msg))
		}
	}
	for i, suffix := range a.NameSuffixes {
		at := p.Child("NameSuffixes").Index(i)
		lower := strings.ToLower(suffix)
		_, notIP := netip.ParseAddr(suffix)
		switch ok, why := syntax.Host(suffix, syntax.DialedByShadow); {
		case !ok:
			errs = append(errs, field.Invalid(at, suffix, "must be a DNS domain such as example.org: it is "+why))
		case notIP == nil:
			errs = append(errs, field.Invalid(at, suffix, "is an IP address; list addresses in AllowedDestinations.CIDRs"))
		case !strings.Contains(suffix, "."):
			errs = append(errs, field.Invalid(at, suffix, "is a single label, which would also allow <service>."+suffix+", a Service of namespace "+suffix+"; give a domain such as example.org, or list the namespace in AllowedDestinations.Namespaces"))
		case lower == "svc" || strings.HasSuffix(lower, ".svc") || lower == clusterDomain || strings.HasSuffix(lower, "."+clusterDomain):
			errs = append(errs, field.Invalid(at, suffix, "names the cluster's own Services, which AllowedDestinations.Namespaces allows by namespace; list the namespaces there"))
		}
	}
	for i, cidr := range a.CIDRs {
		prefix, err := netip.ParsePrefix(cidr)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("CIDRs").Index(i), cidr, "must be a CIDR such as 10.20.0.0/16 or fd00:20::/64"))
		case prefix != prefix.Masked():
			errs = append(errs, field.Invalid(p.Child("CIDRs").Index(i), cidr, fmt.Sprintf("has bits set past its prefix length; write %s", prefix.Masked())))
		}
	}
	return errs
}

func validateExtraOption(p *field.Path, opt string) field.ErrorList {
	if !syntax.SSHOption(opt) {
		errs := field.ErrorList{field.Invalid(p, opt,
			"each entry must be one ssh option written Key=Value, in printable ASCII without whitespace, quotes or shell characters, so it cannot carry a second option or a command")}
		if key := syntax.SSHOptionKey(opt); key != "" {
			if why := extraOptionProblem(key, ""); strings.Contains(why, "not allowed") {
				errs = append(errs, field.Forbidden(p, why))
			}
		}
		return errs
	}
	key, value, _ := strings.Cut(opt, "=")
	if why := extraOptionProblem(key, value); why != "" {
		return field.ErrorList{field.Forbidden(p, why)}
	}
	return nil
}

func objectName(p *field.Path, name, kind string) field.ErrorList {
	if name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, "must be the name of a "+kind+": "+msg))
	}
	return errs
}

func dataKey(p *field.Path, key string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(p, key, "must be a key inside the Secret: "+msg))
	}
	return errs
}
