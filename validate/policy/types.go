package policy

import (
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Policy is the parsed, defaulted document held in the policy ConfigMap under DataKey.
type Policy struct {
	VirtualNodes map[string]VirtualNode `json:"virtualNodes"`
	// Ignored says, for each key of the virtual kubelet's Network block that shadowgate does
	// not read, where it is and why it is ignored: said as a warning, not refused, so an admin
	// can paste the VK's block unchanged.
	Ignored []string `json:"-"`
}

// VirtualNode is one virtual node's settings.
type VirtualNode struct {
	Network Network `json:"Network"`
	// AllowedNamespaces and AllowedNamespaceSelector bind the node to the namespaces whose pods
	// may use it: every pod of a virtual node runs its job as the node's one site account, so
	// the namespaces sharing a node share that account. A pod's namespace may use the node when
	// it is listed or its labels match the selector. With neither set, any namespace may.
	AllowedNamespaces        []string              `json:"AllowedNamespaces"`
	AllowedNamespaceSelector *metav1.LabelSelector `json:"AllowedNamespaceSelector"`
}

// NamespaceBound reports whether the node names the namespaces that may use it.
func (v *VirtualNode) NamespaceBound() bool {
	return v.AllowedNamespaces != nil || v.AllowedNamespaceSelector != nil
}

// Network mirrors the virtual kubelet's Network block; option names are the user guide's.
type Network struct {
	EnableTunnel bool   `json:"EnableTunnel"`
	ShadowMode   string `json:"ShadowMode"`
	FullMesh     bool   `json:"FullMesh"`
	SSH          SSH    `json:"SSH"`
	// WildcardDNS, IngressTLS and IngressClusterIssuer are the virtual kubelet's keys for its
	// shadow's ingress; here they open the front door (FrontDoor): with WildcardDNS set, each
	// port the SSH shadow forwards is also published at a host under it.
	WildcardDNS          string    `json:"WildcardDNS"`
	IngressTLS           bool      `json:"IngressTLS"`
	IngressClusterIssuer string    `json:"IngressClusterIssuer"`
	FrontDoor            FrontDoor `json:"FrontDoor"`
}

// FrontDoor says how the shadow's ports are published outside the cluster when WildcardDNS is
// set: through an Ingress of IngressClassName, or an HTTPRoute attached to Gateway, carrying
// TLS with a certificate from IngressClusterIssuer (cert-manager) or the existing TLSSecret.
type FrontDoor struct {
	Kind             string     `json:"Kind"` // FrontDoorIngress | FrontDoorHTTPRoute
	IngressClassName string     `json:"IngressClassName"`
	Gateway          GatewayRef `json:"Gateway"`
	// TLSSecret is a wildcard certificate for WildcardDNS (a kubernetes.io/tls Secret), copied
	// into each shadow namespace with the credentials.
	TLSSecret string `json:"TLSSecret"`
	// AllowPlainHTTP lets IngressTLS: false publish the ports over plain HTTP.
	AllowPlainHTTP bool `json:"AllowPlainHTTP"`
	// ControllerNamespace is where the pods that proxy the front door's traffic run (the
	// ingress controller's, the Gateway's data plane): the shadow's NetworkPolicy admits them
	// to the forwarded ports. For an HTTPRoute, empty means Gateway.Namespace.
	ControllerNamespace string `json:"ControllerNamespace"`
}

// ProxyNamespace is the namespace whose pods the shadow's NetworkPolicy admits to the
// forwarded ports for the front door.
func (f *FrontDoor) ProxyNamespace() string {
	if f.ControllerNamespace == "" && f.Kind == FrontDoorHTTPRoute {
		return f.Gateway.Namespace
	}
	return f.ControllerNamespace
}

// GatewayRef names the Gateway API Gateway, and the listener of it, that HTTPRoutes attach to.
type GatewayRef struct {
	Name        string `json:"Name"`
	Namespace   string `json:"Namespace"`
	SectionName string `json:"SectionName"`
}

// SSH configures the SSH shadow.
type SSH struct {
	LoginHost          string `json:"LoginHost"`
	User               string `json:"User"`
	Port               int    `json:"Port"`
	Image              string `json:"Image"`
	Auth               string `json:"Auth"`
	ForwardMode        string `json:"ForwardMode"`
	ExecConnectCommand string `json:"ExecConnectCommand"`
	// ExecSessionsPerLogin is how many channels one login may carry: the login node's sshd
	// MaxSessions. ExecMaxLogins bounds the logins exec mode opens as channels run out.
	ExecSessionsPerLogin int      `json:"ExecSessionsPerLogin"`
	ExecMaxLogins        int      `json:"ExecMaxLogins"`
	KeySecret            string   `json:"KeySecret"`
	KeySecretKey         string   `json:"KeySecretKey"`
	KeytabSecret         string   `json:"KeytabSecret"`
	KeytabSecretKey      string   `json:"KeytabSecretKey"`
	Principal            string   `json:"Principal"`
	Bastion              Bastion  `json:"Bastion"`
	Krb5ConfigMap        string   `json:"Krb5ConfigMap"`
	KnownHostsConfigMap  string   `json:"KnownHostsConfigMap"`
	ReplicateCredentials bool     `json:"ReplicateCredentials"`
	NodeWaitTimeout      string   `json:"NodeWaitTimeout"`
	NodeDiscovery        string   `json:"NodeDiscovery"` // NodeDiscoveryConfigMap | NodeDiscoverySlurm
	ExtraOptions         []string `json:"ExtraOptions"`
	Reverse              Reverse  `json:"Reverse"`
}

// Bastion is the jump host every ssh of the shadow reaches the login node through, when Host
// is set. The hop logs in with the login's own credential and host key checking: its host key
// is pinned in the same known_hosts (KnownHostsConfigMap), or learned at first use beside the
// login node's when none is named.
type Bastion struct {
	Host string `json:"Host"`
	Port int    `json:"Port"`
	// User is the login name on the bastion; empty means SSH.User (BastionUser).
	User string `json:"User"`
}

// BastionUser is the login name on the bastion: Bastion.User, else User.
func (s *SSH) BastionUser() string {
	if s.Bastion.User != "" {
		return s.Bastion.User
	}
	return s.User
}

// Reverse configures the pod-to-cluster tunnel.
type Reverse struct {
	Enabled    bool   `json:"Enabled"`
	AllowSocks bool   `json:"AllowSocks"`
	NodeExec   string `json:"NodeExec"`
	Sshd       string `json:"Sshd"`
	SshdPath   string `json:"SshdPath"`
	PythonPath string `json:"PythonPath"`
	// AllowedDestinations is where the reverse forwards of pods on this node may lead.
	AllowedDestinations AllowedDestinations `json:"AllowedDestinations"`
}

// AllowedDestinations lists where reverse forwards may lead. The job's traffic leaves from the
// shadow pod, so the pod namespace's own egress NetworkPolicies do not hold it: this does.
// Names are judged as written, never resolved; an IP address is allowed only inside CIDRs.
type AllowedDestinations struct {
	// PodNamespace allows Services of the pod's own namespace, by bare name or qualified with
	// it. It is on by default: the pod's author may already reach them from the pod itself.
	PodNamespace bool `json:"PodNamespace"`
	// Namespaces allows Services of these namespaces.
	Namespaces []string `json:"Namespaces"`
	// NameSuffixes allows names equal to or ending in .<suffix>, such as example.org.
	NameSuffixes []string `json:"NameSuffixes"`
	// CIDRs allows IP addresses inside these prefixes.
	CIDRs []string `json:"CIDRs"`
}

// Option values.
const (
	ShadowModeWstunnel = "wstunnel"
	ShadowModeSSH      = "ssh"

	AuthPublicKey = "publickey"
	AuthKerberos  = "kerberos"

	ForwardModePortForward = "portforward"
	ForwardModeExec        = "exec"

	NodeExecSSH  = "ssh"
	NodeExecSrun = "srun"

	SshdNode      = "node"
	SshdUserspace = "userspace"

	// NodeDiscoveryConfigMap: the shadow reads the compute node from its node ConfigMap,
	// where a virtual kubelet (or plugin) that publishes the node writes it.
	NodeDiscoveryConfigMap = "configmap"
	// NodeDiscoverySlurm: the shadow asks Slurm on the login node, over its own login, where
	// the job named after the pod UID runs (squeue) and at which address Slurm itself reaches
	// that node (scontrol show node: NodeAddr).
	NodeDiscoverySlurm = "slurm"

	// FrontDoorIngress publishes the shadow's ports with a networking.k8s.io/v1 Ingress,
	// FrontDoorHTTPRoute with a Gateway API gateway.networking.k8s.io/v1 HTTPRoute.
	FrontDoorIngress   = "Ingress"
	FrontDoorHTTPRoute = "HTTPRoute"
)

// ShadowImageVersion is the tag of shadowgate's shadow image (shadow.Dockerfile), which
// hack/build-shadow-image.sh builds and a release publishes. It is raised with every change to
// what the image holds (shadow.Dockerfile, hack/shadow-entrypoint.sh, the common.sh it copies),
// so a tag names one content; scripts that need a new image change it in the same commit.
const ShadowImageVersion = "0.1.0"

// DefaultImage is the shadow image when the policy names none: shadowgate's own
// (shadow.Dockerfile), built and pushed by the site as docs/install.md says.
const DefaultImage = "ghcr.io/interlink-hq/shadowgate/shadow:" + ShadowImageVersion

// Defaults returns a virtual node with every option at the user guide's default.
func Defaults() VirtualNode {
	return VirtualNode{Network: Network{
		ShadowMode: ShadowModeWstunnel,
		// HTTPS unless the admin says otherwise, where the virtual kubelet's default is off.
		IngressTLS: true,
		FrontDoor:  FrontDoor{Kind: FrontDoorIngress},
		SSH: SSH{
			Port:                 22,
			Image:                DefaultImage,
			Auth:                 AuthPublicKey,
			ForwardMode:          ForwardModePortForward,
			ExecConnectCommand:   "nc",
			ExecSessionsPerLogin: 10, // sshd's default MaxSessions
			ExecMaxLogins:        4,
			KeySecretKey:         "id_ed25519",
			KeytabSecretKey:      "user.keytab",
			ReplicateCredentials: true,
			NodeWaitTimeout:      "2h",
			Bastion:              Bastion{Port: 22},
			// slurm, because interLink's virtual kubelet as it runs beside shadowgate
			// (EnableTunnel: false) publishes no compute node: under configmap the shadow would
			// wait out NodeWaitTimeout for a node nobody writes. configmap is for a VK or
			// plugin that does publish it (docs/node-discovery.md).
			NodeDiscovery: NodeDiscoverySlurm,
			ExtraOptions:  []string{},
			Reverse: Reverse{
				NodeExec:   NodeExecSSH,
				Sshd:       SshdNode,
				SshdPath:   "/usr/sbin/sshd",
				PythonPath: "python3",
				AllowedDestinations: AllowedDestinations{
					PodNamespace: true,
				},
			},
		},
	}}
}

// SSHShadow reports whether this node renders the SSH shadow.
func (n *Network) SSHShadow() bool { return n.ShadowMode == ShadowModeSSH }

// ReverseEnabled reports whether pods on this node may ask for the reverse tunnel: it rides
// the SSH shadow, so it needs EnableTunnel as the virtual kubelet does.
func (n *Network) ReverseEnabled() bool {
	return n.EnableTunnel && n.SSHShadow() && n.SSH.Reverse.Enabled
}

// HasFrontDoor reports whether this node publishes its shadows' ports outside the cluster.
func (n *Network) HasFrontDoor() bool {
	return n.SSHShadow() && n.EnableTunnel && n.WildcardDNS != ""
}

// Domain is WildcardDNS without its leading "*.": the domain the front door's hosts are in.
// The virtual kubelet takes *.tunnel.example.com and tunnel.example.com alike.
func (n *Network) Domain() string { return strings.TrimPrefix(n.WildcardDNS, "*.") }

// CredentialSecret is the Secret the shadow's ssh authenticates with: the keytab under
// Kerberos, else the key; empty when the policy names none.
func (s *SSH) CredentialSecret() string {
	if s.Auth == AuthKerberos {
		return s.KeytabSecret
	}
	return s.KeySecret
}

// NodeWait is NodeWaitTimeout as a duration. Validate has refused a policy where it does not parse.
func (s *SSH) NodeWait() time.Duration {
	d, err := time.ParseDuration(s.NodeWaitTimeout)
	if err != nil {
		return 0
	}
	return d
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

// SelectsNamespaces reports whether a virtual node of the policy is bound to namespaces by
// labels, so that a decision needs the labels of the pod's namespace.
func (p *Policy) SelectsNamespaces() bool {
	for _, vn := range p.VirtualNodes {
		if vn.AllowedNamespaceSelector != nil {
			return true
		}
	}
	return false
}
