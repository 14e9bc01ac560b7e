package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate/syntax"
)

// commandOptions are ssh options that run a command on the shadow's side; a policy must not
// turn the tunnel into a way to run one.
var commandOptions = map[string]bool{
	"proxycommand": true, "localcommand": true, "permitlocalcommand": true,
	"knownhostscommand": true, "remotecommand": true, "match": true,
}

// Validate checks a defaulted policy and returns every problem found. docPath prefixes the
// error paths; nil means the document is the root.
func (p *Policy) Validate(docPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	nodesPath := child(docPath, "virtualNodes")
	for _, name := range p.NodeNames() {
		nodePath := nodesPath.Key(name)
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(nodePath, name, "a virtual node is named by its node name: "+msg))
		}
		vn := p.VirtualNodes[name]
		errs = append(errs, validateNetwork(&vn.Network, nodePath.Child("Network"))...)
	}
	return errs
}

// NodeNames returns the virtual node names in order.
func (p *Policy) NodeNames() []string {
	names := make([]string, 0, len(p.VirtualNodes))
	for name := range p.VirtualNodes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func validateNetwork(n *Network, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch n.ShadowMode {
	case ShadowModeWstunnel:
	case ShadowModeSSH:
		if n.FullMesh {
			errs = append(errs, field.Invalid(p.Child("FullMesh"), true,
				"the SSH shadow cannot be combined with full mesh: the mesh needs the compute node to dial out to the cluster, "+
					"which is what the SSH shadow exists to avoid; set FullMesh: false and use the reverse tunnel (SSH.Reverse) for pod-to-cluster traffic, or use ShadowMode: wstunnel"))
		}
		errs = append(errs, validateSSH(&n.SSH, p.Child("SSH"))...)
	default:
		errs = append(errs, field.NotSupported(p.Child("ShadowMode"), n.ShadowMode, []string{ShadowModeWstunnel, ShadowModeSSH}))
	}
	return errs
}

func validateSSH(s *SSH, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.LoginHost == "" {
		errs = append(errs, field.Required(p.Child("LoginHost"), "the SSH shadow needs the login node to dial in to"))
	} else if ok, why := syntax.Host(s.LoginHost); !ok {
		errs = append(errs, field.Invalid(p.Child("LoginHost"), s.LoginHost,
			why+"; give the login node's hostname (login.hpc.example.org) or IP address"))
	}
	if s.User == "" {
		errs = append(errs, field.Required(p.Child("User"), "the SSH shadow needs the login name on the login node"))
	} else if !syntax.UserName(s.User) {
		errs = append(errs, field.Invalid(p.Child("User"), s.User,
			"a login name has only letters, digits, '_', '.' and '-', does not start with '-' or '.', and has at most 64 characters"))
	}
	if s.Port < 1 || s.Port > 65535 {
		errs = append(errs, field.Invalid(p.Child("Port"), s.Port, "must be a TCP port between 1 and 65535"))
	}
	if !syntax.Image(s.Image) {
		errs = append(errs, field.Invalid(p.Child("Image"), s.Image, "must be a container image reference such as ghcr.io/interlink-hq/interlink/ssh-tunnel:0.6.0"))
	}
	errs = append(errs, validateAuth(s, p)...)
	switch s.ForwardMode {
	case ForwardModePortForward:
	case ForwardModeExec:
		if !syntax.CommandWords(s.ExecConnectCommand) {
			errs = append(errs, field.Invalid(p.Child("ExecConnectCommand"), s.ExecConnectCommand,
				"must be a command and its options as plain words separated by single spaces (nc, \"nc -q 1\", ncat), without quotes or shell characters: it runs on the login node as <command> <node> <port>"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("ForwardMode"), s.ForwardMode, []string{ForwardModePortForward, ForwardModeExec}))
	}
	errs = append(errs, objectName(p.Child("Krb5ConfigMap"), s.Krb5ConfigMap, "ConfigMap")...)
	errs = append(errs, objectName(p.Child("KnownHostsConfigMap"), s.KnownHostsConfigMap, "ConfigMap")...)
	if d, err := time.ParseDuration(s.NodeWaitTimeout); err != nil {
		errs = append(errs, field.Invalid(p.Child("NodeWaitTimeout"), s.NodeWaitTimeout, "must be a Go duration such as 2h or 90m"))
	} else if d <= 0 {
		errs = append(errs, field.Invalid(p.Child("NodeWaitTimeout"), s.NodeWaitTimeout, "must be positive: it is how long the shadow waits for the batch system to place the job"))
	}
	for i, opt := range s.ExtraOptions {
		errs = append(errs, validateExtraOption(p.Child("ExtraOptions").Index(i), opt)...)
	}
	return append(errs, validateReverse(&s.Reverse, p.Child("Reverse"))...)
}

func validateAuth(s *SSH, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Auth {
	case AuthPublicKey:
		if s.KeySecret == "" {
			errs = append(errs, field.Required(p.Child("KeySecret"), "publickey authentication needs the Secret holding the private key"))
		}
		errs = append(errs, objectName(p.Child("KeySecret"), s.KeySecret, "Secret")...)
		errs = append(errs, dataKey(p.Child("KeySecretKey"), s.KeySecretKey)...)
	case AuthKerberos:
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
		errs = append(errs, field.NotSupported(p.Child("Auth"), s.Auth, []string{AuthPublicKey, AuthKerberos}))
	}
	return errs
}

func validateReverse(r *Reverse, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.NodeExec != NodeExecSSH && r.NodeExec != NodeExecSrun {
		errs = append(errs, field.NotSupported(p.Child("NodeExec"), r.NodeExec, []string{NodeExecSSH, NodeExecSrun}))
	}
	if r.Sshd != SshdNode && r.Sshd != SshdUserspace {
		errs = append(errs, field.NotSupported(p.Child("Sshd"), r.Sshd, []string{SshdNode, SshdUserspace}))
	}
	if !strings.HasPrefix(r.SshdPath, "/") || !syntax.Program(r.SshdPath) {
		errs = append(errs, field.Invalid(p.Child("SshdPath"), r.SshdPath, "must be the absolute path of sshd on the compute node, such as /usr/sbin/sshd"))
	}
	if !syntax.Program(r.PythonPath) {
		errs = append(errs, field.Invalid(p.Child("PythonPath"), r.PythonPath, "must be a command name or absolute path such as python3 or /usr/bin/python3"))
	}
	return errs
}

func validateExtraOption(p *field.Path, opt string) field.ErrorList {
	if !syntax.SSHOption(opt) {
		return field.ErrorList{field.Invalid(p, opt,
			"each entry must be one ssh option written Key=Value, without whitespace, newlines, quotes or shell characters, so it cannot carry a second option or a command")}
	}
	key := strings.ToLower(strings.SplitN(opt, "=", 2)[0])
	if commandOptions[key] {
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("%s runs a command on the shadow's side and is not allowed; use ProxyJump for a bastion host", strings.SplitN(opt, "=", 2)[0]))}
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
