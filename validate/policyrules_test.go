package validate_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

// node renders a one-node policy whose SSH block is a valid publickey site plus extra lines.
func node(network string) string {
	return "virtualNodes:\n  cern-vk:\n    Network:\n" + indent(network, 6)
}

func sshNode(sshExtra string) string {
	return node("EnableTunnel: true\nShadowMode: ssh\nSSH:\n  LoginHost: login.hpc.example.org\n  User: alice\n  KeySecret: hpc-ssh-key\n" + indent(sshExtra, 2))
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

var ssh = field.NewPath("virtualNodes").Key("cern-vk").Child("Network", "SSH")

// dest is the path of cern-vk's Reverse.AllowedDestinations.
var dest = ssh.Child("Reverse", "AllowedDestinations")

func TestParse(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want []vt.Err
	}{
		"a publickey site with only the required options is valid": {doc: sshNode("")},
		"a Kerberos site with keytab and principal is valid": {doc: node(
			"ShadowMode: ssh\nSSH:\n  LoginHost: lxplus.cern.ch\n  User: alice\n  Auth: kerberos\n  KeytabSecret: cern-keytab\n  Principal: alice@CERN.CH\n")},
		"a wstunnel node needs no SSH block":    {doc: node("EnableTunnel: true\n")},
		"an empty policy lists no virtual node": {doc: "virtualNodes: {}\n"},
		"a policy without virtualNodes is refused": {doc: "{}\n",
			want: []vt.Err{{Type: field.ErrorTypeRequired, Field: "virtualNodes", Value: ""}}},
		"a ShadowMode other than wstunnel or ssh is refused": {doc: node("ShadowMode: wireguard\n"),
			want: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: "virtualNodes[cern-vk].Network.ShadowMode", Value: "wireguard"}}},
		"ssh together with FullMesh is refused": {doc: node("ShadowMode: ssh\nFullMesh: true\nSSH:\n  LoginHost: l.example.org\n  User: alice\n  KeySecret: k\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: "virtualNodes[cern-vk].Network.FullMesh", Value: true}}},
		"FullMesh with wstunnel is not shadowgate's concern": {doc: node("FullMesh: true\n")},
		"a missing LoginHost and User are both reported": {doc: node("ShadowMode: ssh\nSSH:\n  KeySecret: k\n"),
			want: []vt.Err{
				{Type: field.ErrorTypeRequired, Field: ssh.Child("LoginHost").String(), Value: ""},
				{Type: field.ErrorTypeRequired, Field: ssh.Child("User").String(), Value: ""},
			}},
		"a LoginHost that is an IP literal is valid": {doc: node("ShadowMode: ssh\nSSH:\n  LoginHost: \"fd00::22\"\n  User: alice\n  KeySecret: k\n")},
		"a LoginHost carrying an ssh option is refused": {doc: node("ShadowMode: ssh\nSSH:\n  LoginHost: \"login -oProxyCommand=x\"\n  User: alice\n  KeySecret: k\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("LoginHost").String(), Value: "login -oProxyCommand=x"}}},
		"a User with a shell character is refused": {doc: node("ShadowMode: ssh\nSSH:\n  LoginHost: l.example.org\n  User: \"alice;id\"\n  KeySecret: k\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("User").String(), Value: "alice;id"}}},
		"an Auth other than publickey or kerberos is refused": {doc: sshNode("Auth: password\n"),
			want: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: ssh.Child("Auth").String(), Value: "password"}}},
		"publickey without KeySecret is refused": {doc: node("ShadowMode: ssh\nSSH:\n  LoginHost: l.example.org\n  User: alice\n"),
			want: []vt.Err{{Type: field.ErrorTypeRequired, Field: ssh.Child("KeySecret").String(), Value: ""}}},
		"kerberos without KeytabSecret or Principal is refused": {doc: node("ShadowMode: ssh\nSSH:\n  LoginHost: l.example.org\n  User: alice\n  Auth: kerberos\n"),
			want: []vt.Err{
				{Type: field.ErrorTypeRequired, Field: ssh.Child("KeytabSecret").String(), Value: ""},
				{Type: field.ErrorTypeRequired, Field: ssh.Child("Principal").String(), Value: ""},
			}},
		"a Principal with a space is refused": {doc: node("ShadowMode: ssh\nSSH:\n  LoginHost: l.example.org\n  User: alice\n  Auth: kerberos\n  KeytabSecret: kt\n  Principal: \"alice @X\"\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("Principal").String(), Value: "alice @X"}}},
		"a ForwardMode other than portforward or exec is refused": {doc: sshNode("ForwardMode: socks\n"),
			want: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: ssh.Child("ForwardMode").String(), Value: "socks"}}},
		"exec mode with a plain ExecConnectCommand is valid": {doc: sshNode("ForwardMode: exec\nExecConnectCommand: nc -q 1\n")},
		"an ExecConnectCommand with a shell character is refused": {doc: sshNode("ForwardMode: exec\nExecConnectCommand: \"nc $(id)\"\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("ExecConnectCommand").String(), Value: "nc $(id)"}}},
		"exec mode sized for a login node with a higher MaxSessions is valid": {doc: sshNode("ForwardMode: exec\nExecSessionsPerLogin: 64\nExecMaxLogins: 2\n")},
		"exec mode with one channel per login, none left for relaying, is refused": {doc: sshNode("ForwardMode: exec\nExecSessionsPerLogin: 1\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("ExecSessionsPerLogin").String(), Value: 1}}},
		"exec mode with no logins or more than a login node should see from one shadow is refused": {doc: sshNode("ForwardMode: exec\nExecMaxLogins: 17\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("ExecMaxLogins").String(), Value: 17}}},
		"Port 0 is refused": {doc: sshNode("Port: 0\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("Port").String(), Value: 0}}},
		"Port 65536 is refused": {doc: sshNode("Port: 65536\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("Port").String(), Value: 65536}}},
		"Port 2222 is valid": {doc: sshNode("Port: 2222\n")},
		"a NodeWaitTimeout that is not a Go duration is refused": {doc: sshNode("NodeWaitTimeout: two hours\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("NodeWaitTimeout").String(), Value: "two hours"}}},
		"a NodeWaitTimeout that is not positive is refused": {doc: sshNode("NodeWaitTimeout: 0s\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("NodeWaitTimeout").String(), Value: "0s"}}},
		"a Reverse.NodeExec other than ssh or srun is refused": {doc: sshNode("Reverse:\n  NodeExec: pdsh\n"),
			want: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: ssh.Child("Reverse", "NodeExec").String(), Value: "pdsh"}}},
		"a Reverse.Sshd other than node or userspace is refused": {doc: sshNode("Reverse:\n  Sshd: dropbear\n"),
			want: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: ssh.Child("Reverse", "Sshd").String(), Value: "dropbear"}}},
		"srun and userspace are valid": {doc: sshNode("Reverse:\n  Enabled: true\n  NodeExec: srun\n  Sshd: userspace\n")},
		"AllowedDestinations of namespaces, suffixes and CIDRs is valid": {
			doc: sshNode("Reverse:\n  AllowedDestinations: {PodNamespace: false, Namespaces: [shared], NameSuffixes: [example.org], CIDRs: [10.20.0.0/16, \"fd00:20::/64\"]}\n")},
		"a misspelt AllowedDestinations key is refused": {doc: sshNode("Reverse:\n  AllowedDestinations: {Namespace: [shared]}\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: dest.Child("Namespace").String(), Value: "Namespace"}}},
		"a namespace that is no namespace name is refused": {doc: sshNode("Reverse:\n  AllowedDestinations: {Namespaces: [Kube_System]}\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: dest.Child("Namespaces").Index(0).String(), Value: "Kube_System"}}},
		"a single-label suffix, which is a namespace, is refused": {doc: sshNode("Reverse:\n  AllowedDestinations: {NameSuffixes: [victim]}\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: dest.Child("NameSuffixes").Index(0).String(), Value: "victim"}}},
		"a suffix of the cluster's own names is refused": {doc: sshNode("Reverse:\n  AllowedDestinations: {NameSuffixes: [svc.cluster.local]}\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: dest.Child("NameSuffixes").Index(0).String(), Value: "svc.cluster.local"}}},
		"a suffix that is an address is refused": {doc: sshNode("Reverse:\n  AllowedDestinations: {NameSuffixes: [10.0.0.1]}\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: dest.Child("NameSuffixes").Index(0).String(), Value: "10.0.0.1"}}},
		"a suffix that is a metadata name is refused": {doc: sshNode("Reverse:\n  AllowedDestinations: {NameSuffixes: [metadata.google.internal]}\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: dest.Child("NameSuffixes").Index(0).String(), Value: "metadata.google.internal"}}},
		"a CIDR that does not parse is refused": {doc: sshNode("Reverse:\n  AllowedDestinations: {CIDRs: [10.20.0.0]}\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: dest.Child("CIDRs").Index(0).String(), Value: "10.20.0.0"}}},
		"a CIDR with host bits set is refused": {doc: sshNode("Reverse:\n  AllowedDestinations: {CIDRs: [10.20.3.4/16]}\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: dest.Child("CIDRs").Index(0).String(), Value: "10.20.3.4/16"}}},
		"a relative SshdPath is refused": {doc: sshNode("Reverse:\n  SshdPath: sshd\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("Reverse", "SshdPath").String(), Value: "sshd"}}},
		"ExtraOptions written Key=Value are valid": {doc: sshNode("ExtraOptions:\n- ServerAliveCountMax=3\n- Ciphers=aes256-gcm@openssh.com\n")},
		"an ExtraOption smuggling a second option is refused": {doc: sshNode("ExtraOptions:\n- \"Compression=yes -oProxyCommand=x\"\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("ExtraOptions").Index(0).String(), Value: "Compression=yes -oProxyCommand=x"}}},
		"an ExtraOption with a newline is refused": {doc: sshNode("ExtraOptions:\n- \"Compression=yes\\nProxyCommand=x\"\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("ExtraOptions").Index(0).String(), Value: "Compression=yes\nProxyCommand=x"}}},
		"an ExtraOption that runs a command is refused": {doc: sshNode("ExtraOptions:\n- ProxyCommand=nc\n"),
			want: []vt.Err{{Type: field.ErrorTypeForbidden, Field: ssh.Child("ExtraOptions").Index(0).String(), Value: ""}}},
		"a misspelt key is an error at its path, not a default": {doc: node("ShadowMode: ssh\nSSH:\n  LoginHst: l.example.org\n  User: alice\n  KeySecret: k\n"),
			want: []vt.Err{
				{Type: field.ErrorTypeInvalid, Field: ssh.Child("LoginHst").String(), Value: "LoginHst"},
				{Type: field.ErrorTypeRequired, Field: ssh.Child("LoginHost").String(), Value: ""},
			}},
		"shape errors and rule errors are reported together": {doc: sshNode("Prot: 22\nPort: 0\nExtraOptions: [7, \"A=b c\"]\n"),
			want: []vt.Err{
				{Type: field.ErrorTypeInvalid, Field: ssh.Child("ExtraOptions").Index(0).String(), Value: "7"},
				{Type: field.ErrorTypeInvalid, Field: ssh.Child("Prot").String(), Value: "Prot"},
				{Type: field.ErrorTypeInvalid, Field: ssh.Child("Port").String(), Value: 0},
				{Type: field.ErrorTypeInvalid, Field: ssh.Child("ExtraOptions").Index(0).String(), Value: ""},
				{Type: field.ErrorTypeInvalid, Field: ssh.Child("ExtraOptions").Index(1).String(), Value: "A=b c"},
			}},
		"a value of the wrong type is an error at its path": {doc: sshNode("ReplicateCredentials: \"no\"\n"),
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("ReplicateCredentials").String(), Value: "no"}}},
		"a virtual node name that is not a node name is refused": {doc: "virtualNodes:\n  HPC_VK: {}\n",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: "virtualNodes[HPC_VK]", Value: "HPC_VK"}}},
		"a document that is not YAML is refused": {doc: "virtualNodes: [\n",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: "policy.yaml", Value: ""}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := validate.ParsePolicy([]byte(tc.doc), validate.CredentialRules{})
			vt.Expect(t, errs, tc.want)
		})
	}
}

func TestExtraOptions(t *testing.T) {
	opts := ssh.Child("ExtraOptions")
	forbidden := func(i int) []vt.Err {
		return []vt.Err{{Type: field.ErrorTypeForbidden, Field: opts.Index(i).String(), Value: ""}}
	}
	invalid := func(i int, opt string) []vt.Err {
		return []vt.Err{{Type: field.ErrorTypeInvalid, Field: opts.Index(i).String(), Value: opt}}
	}
	cases := map[string]struct {
		options []string
		want    []vt.Err
	}{
		"keepalive, cipher, compression and timeout options are admitted": {options: []string{
			"ServerAliveInterval=10", "ServerAliveCountMax=5", "ConnectTimeout=60", "Ciphers=aes256-gcm@openssh.com",
			"Compression=yes", "LogLevel=ERROR", "IPQoS=throughput", "AddressFamily=inet", "TCPKeepAlive=no",
			"KexAlgorithms=-diffie-hellman-group14-sha1", "MACs=+hmac-sha2-512-etm@openssh.com", "loglevel=verbose"}},
		"options shadowgate sets first are refused, as they would do nothing": {options: []string{
			"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "GlobalKnownHostsFile=/tmp/x", "User=root", "Port=2200",
			"BatchMode=no", "PreferredAuthentications=password"},
			want: []vt.Err{forbidden(0)[0], forbidden(1)[0], forbidden(2)[0], forbidden(3)[0], forbidden(4)[0], forbidden(5)[0], forbidden(6)[0]}},
		"a weak key exchange added is refused":              {options: []string{"KexAlgorithms=+diffie-hellman-group1-sha1"}, want: forbidden(0)},
		"ssh-rsa host keys added are refused":               {options: []string{"HostKeyAlgorithms=+ssh-rsa"}, want: forbidden(0)},
		"a weak cipher added is refused":                    {options: []string{"Ciphers=+3des-cbc"}, want: forbidden(0)},
		"a weak MAC put first is refused":                   {options: []string{"MACs=^hmac-md5"}, want: forbidden(0)},
		"a weak cipher in a whole list is refused":          {options: []string{"Ciphers=aes256-ctr,ARCFOUR"}, want: forbidden(0)},
		"RequiredRSASize is not a tuning option":            {options: []string{"RequiredRSASize=512"}, want: forbidden(0)},
		"UpdateHostKeys is not a tuning option":             {options: []string{"UpdateHostKeys=yes"}, want: forbidden(0)},
		"HostbasedAuthentication is not one":                {options: []string{"HostbasedAuthentication=yes"}, want: forbidden(0)},
		"ProxyUseFdpass is not one":                         {options: []string{"ProxyUseFdpass=yes"}, want: forbidden(0)},
		"IgnoreUnknown is not one":                          {options: []string{"IgnoreUnknown=Foo"}, want: forbidden(0)},
		"RequestTTY is not one":                             {options: []string{"RequestTTY=force"}, want: forbidden(0)},
		"a keyword OpenSSH adds later is refused":           {options: []string{"FutureOption=yes"}, want: forbidden(0)},
		"ProxyJump drops shadowgate's options":              {options: []string{"ProxyJump=bastion.example.org"}, want: forbidden(0)},
		"LogLevel above VERBOSE is refused":                 {options: []string{"LogLevel=DEBUG3"}, want: forbidden(0)},
		"a keepalive that is not a number is refused":       {options: []string{"ServerAliveInterval=1e3"}, want: forbidden(0)},
		"a NUL in a value is refused":                       {options: []string{"Compression=yes\x00"}, want: invalid(0, "Compression=yes\x00")},
		"a vertical tab in a value is refused":              {options: []string{"Compression=yes\v"}, want: invalid(0, "Compression=yes\v")},
		"a no-break space in a value is refused":            {options: []string{"Compression=yes\u00a0"}, want: invalid(0, "Compression=yes\u00a0")},
		"a line separator in a value is refused":            {options: []string{"Compression=yes\u2028"}, want: invalid(0, "Compression=yes\u2028")},
		"ProxyCommand runs a command":                       {options: []string{"ProxyCommand=nc"}, want: forbidden(0)},
		"LocalCommand runs a command":                       {options: []string{"LocalCommand=id"}, want: forbidden(0)},
		"PermitLocalCommand lets LocalCommand run":          {options: []string{"PermitLocalCommand=yes"}, want: forbidden(0)},
		"KnownHostsCommand runs a command":                  {options: []string{"KnownHostsCommand=/bin/cat"}, want: forbidden(0)},
		"RemoteCommand replaces shadowgate's command":       {options: []string{"RemoteCommand=id"}, want: forbidden(0)},
		"XAuthLocation names a program ssh runs":            {options: []string{"XAuthLocation=/tmp/x"}, want: forbidden(0)},
		"PKCS11Provider loads a shared library":             {options: []string{"PKCS11Provider=/tmp/evil.so"}, want: forbidden(0)},
		"SmartcardDevice, PKCS11Provider's alias, too":      {options: []string{"SmartcardDevice=/tmp/evil.so"}, want: forbidden(0)},
		"SecurityKeyProvider loads a shared library":        {options: []string{"SecurityKeyProvider=/tmp/evil.so"}, want: forbidden(0)},
		"Match is a block whose exec runs a command":        {options: []string{"Match=all"}, want: forbidden(0)},
		"Include reads options from a file":                 {options: []string{"Include=/tmp/config"}, want: forbidden(0)},
		"Host is a block, not an option":                    {options: []string{"Host=login.example.org"}, want: forbidden(0)},
		"LocalForward opens a listener":                     {options: []string{"LocalForward=8080:intranet.hpc:80"}, want: forbidden(0)},
		"RemoteForward opens a listener on the site":        {options: []string{"RemoteForward=9000:minio.user:9000"}, want: forbidden(0)},
		"DynamicForward opens a SOCKS proxy":                {options: []string{"DynamicForward=1080"}, want: forbidden(0)},
		"GatewayPorts opens the forwards to others":         {options: []string{"GatewayPorts=yes"}, want: forbidden(0)},
		"PermitRemoteOpen changes where SOCKS connects":     {options: []string{"PermitRemoteOpen=any"}, want: forbidden(0)},
		"Tunnel opens a tun device":                         {options: []string{"Tunnel=point-to-point"}, want: forbidden(0)},
		"TunnelDevice names a tun device":                   {options: []string{"TunnelDevice=any:any"}, want: forbidden(0)},
		"ForwardAgent forwards an agent socket":             {options: []string{"ForwardAgent=yes"}, want: forbidden(0)},
		"ForwardX11 opens an X11 channel":                   {options: []string{"ForwardX11=yes"}, want: forbidden(0)},
		"Hostname sends every hop elsewhere":                {options: []string{"Hostname=attacker.example.org"}, want: forbidden(0)},
		"CanonicalDomains rewrites the names dialled":       {options: []string{"CanonicalDomains=example.org"}, want: forbidden(0)},
		"CanonicalizeHostname rewrites the names":           {options: []string{"CanonicalizeHostname=yes"}, want: forbidden(0)},
		"HostKeyAlias checks another host's key":            {options: []string{"HostKeyAlias=trusted.example.org"}, want: forbidden(0)},
		"VerifyHostKeyDNS trusts keys from DNS":             {options: []string{"VerifyHostKeyDNS=yes"}, want: forbidden(0)},
		"NoHostAuthenticationForLocalhost skips checks":     {options: []string{"NoHostAuthenticationForLocalhost=yes"}, want: forbidden(0)},
		"IdentityFile adds a credential":                    {options: []string{"IdentityFile=/run/shadow/other"}, want: forbidden(0)},
		"CertificateFile adds a credential":                 {options: []string{"CertificateFile=/run/shadow/cert"}, want: forbidden(0)},
		"IdentityAgent adds an agent's credentials":         {options: []string{"IdentityAgent=/run/shadow/agent"}, want: forbidden(0)},
		"SendEnv passes the shadow's environment":           {options: []string{"SendEnv=LANG"}, want: forbidden(0)},
		"SetEnv sets variables srun reads":                  {options: []string{"SetEnv=SLURM_JOB_ID=1"}, want: forbidden(0)},
		"ControlMaster shares connections":                  {options: []string{"ControlMaster=auto"}, want: forbidden(0)},
		"ControlPath names a shared connection":             {options: []string{"ControlPath=/run/shadow/cm"}, want: forbidden(0)},
		"ControlPersist keeps a master in the background":   {options: []string{"ControlPersist=yes"}, want: forbidden(0)},
		"ClearAllForwardings removes shadowgate's forwards": {options: []string{"ClearAllForwardings=yes"}, want: forbidden(0)},
		"ForkAfterAuthentication backgrounds ssh":           {options: []string{"ForkAfterAuthentication=yes"}, want: forbidden(0)},
		"SessionType changes the sessions scripts drive":    {options: []string{"SessionType=none"}, want: forbidden(0)},
		"StdinNull takes the scripts' input away":           {options: []string{"StdinNull=yes"}, want: forbidden(0)},
		"a keyword in another case is the same option":      {options: []string{"pkcs11PROVIDER=/tmp/evil.so"}, want: forbidden(0)},
		"a refused option written Key value is refused as both": {options: []string{"ProxyCommand nc"}, want: []vt.Err{
			{Type: field.ErrorTypeInvalid, Field: opts.Index(0).String(), Value: "ProxyCommand nc"}, forbidden(0)[0]}},
		"each refused entry is reported at its index": {options: []string{"Compression=yes", "Hostname=x.example.org", "ServerAliveInterval=5", "DynamicForward=1080"},
			want: []vt.Err{forbidden(1)[0], forbidden(3)[0]}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := "ExtraOptions:\n"
			for _, o := range tc.options {
				doc += "- " + strconv.Quote(o) + "\n"
			}
			_, errs := validate.ParsePolicy([]byte(sshNode(doc)), validate.CredentialRules{})
			vt.Expect(t, errs, tc.want)
		})
	}
}

func TestExtraOptionRefusalNamesOptionAndReason(t *testing.T) {
	_, errs := validate.ParsePolicy([]byte(sshNode("ExtraOptions:\n- SmartcardDevice=/tmp/evil.so\n")), validate.CredentialRules{})
	if len(errs) != 1 {
		t.Fatalf("errors = %v, want one", errs)
	}
	for _, want := range []string{"SmartcardDevice", "shared library", "KeySecret"} {
		if !strings.Contains(errs[0].Detail, want) {
			t.Errorf("detail %q does not say %q", errs[0].Detail, want)
		}
	}
}

func TestDefaults(t *testing.T) {
	p, errs := validate.ParsePolicy([]byte(sshNode("")), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	s := p.VirtualNodes["cern-vk"].Network.SSH
	if s.Port != 22 || s.Auth != "publickey" || s.ForwardMode != "portforward" || s.ExecConnectCommand != "nc" ||
		s.KeySecretKey != "id_ed25519" || s.KeytabSecretKey != "user.keytab" || !s.ReplicateCredentials ||
		s.NodeWait() != 2*time.Hour || s.Reverse.NodeExec != "ssh" || s.Reverse.Sshd != "node" ||
		s.Reverse.SshdPath != "/usr/sbin/sshd" || s.Reverse.PythonPath != "python3" || s.Reverse.Enabled || s.Reverse.AllowSocks || !s.Reverse.AllowedDestinations.PodNamespace ||
		s.NodeDiscovery != "slurm" {
		t.Errorf("defaults differ from the user guide's table: %+v", s)
	}
	if p.VirtualNodes["cern-vk"].Network.ShadowMode != "ssh" {
		t.Error("ShadowMode was not read")
	}
	w, _ := validate.ParsePolicy([]byte(node("EnableTunnel: true\n")), validate.CredentialRules{})
	if got := w.VirtualNodes["cern-vk"].Network.ShadowMode; got != "wstunnel" {
		t.Errorf("ShadowMode defaults to %q, want wstunnel", got)
	}
	off, _ := validate.ParsePolicy([]byte(sshNode("ReplicateCredentials: false\n")), validate.CredentialRules{})
	if off.VirtualNodes["cern-vk"].Network.SSH.ReplicateCredentials {
		t.Error("an explicit ReplicateCredentials: false was overridden by the default")
	}
}

func TestParseConfigMap(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shadowgate-policy\ndata:\n  policy.yaml: |\n" + indent(node("ShadowMode: ssh\nSSH:\n  User: alice\n  KeySecret: k\n"), 4)
	_, errs := validate.ParsePolicy([]byte(cm), validate.CredentialRules{})
	vt.Expect(t, errs, []vt.Err{{Type: field.ErrorTypeRequired, Field: ssh.Child("LoginHost").String(), Value: ""}})

	_, errs = validate.ParsePolicy([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  other: x\n"), validate.CredentialRules{})
	vt.Expect(t, errs, []vt.Err{{Type: field.ErrorTypeRequired, Field: "data[policy.yaml]", Value: ""}})
}

func TestExamplePolicyIsValid(t *testing.T) {
	p, errs := validate.ParsePolicy(mustRead(t, "../manifests/examples/policy.yaml"), validate.CredentialRules{})
	if len(errs) > 0 {
		t.Fatalf("the example policy is refused: %v", errs)
	}
	if got := strings.Join(p.NodeNames(), ","); got != "cern-vk,hpc-vk" {
		t.Errorf("example nodes = %s", got)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNodeDiscovery(t *testing.T) {
	for sentence, tc := range map[string]struct {
		ssh, want string
		errs      []vt.Err
	}{
		"left out, the shadow asks Slurm: the virtual kubelet beside shadowgate publishes no node": {ssh: "", want: "slurm"},
		"slurm is read":     {ssh: "NodeDiscovery: slurm\n", want: "slurm"},
		"configmap is read": {ssh: "NodeDiscovery: configmap\n", want: "configmap"},
		"another value is refused, listing both": {ssh: "NodeDiscovery: vk\n",
			errs: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: ssh.Child("NodeDiscovery").String(), Value: "vk"}}},
		"an empty value is refused rather than defaulted": {ssh: "NodeDiscovery: \"\"\n",
			errs: []vt.Err{{Type: field.ErrorTypeNotSupported, Field: ssh.Child("NodeDiscovery").String(), Value: ""}}},
		"a misspelt key is an error at its path, not the default": {ssh: "NodeDiscover: configmap\n",
			errs: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("NodeDiscover").String(), Value: "NodeDiscover"}}},
		"a value of the wrong type is an error at its path": {ssh: "NodeDiscovery: [slurm]\n",
			errs: []vt.Err{{Type: field.ErrorTypeInvalid, Field: ssh.Child("NodeDiscovery").String(), Value: "a list"}}},
	} {
		t.Run(sentence, func(t *testing.T) {
			p, errs := validate.ParsePolicy([]byte(sshNode(tc.ssh)), validate.CredentialRules{})
			vt.Expect(t, errs, tc.errs)
			if tc.errs != nil {
				return
			}
			if got := p.VirtualNodes["cern-vk"].Network.SSH.NodeDiscovery; got != tc.want {
				t.Errorf("NodeDiscovery %q, want %q", got, tc.want)
			}
		})
	}
	_, errs := validate.ParsePolicy([]byte(sshNode("NodeDiscovery: vk\n")), validate.CredentialRules{})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `"configmap"`) || !strings.Contains(errs[0].Error(), `"slurm"`) {
		t.Errorf("the refusal does not list both values: %v", errs)
	}
}

func TestExecConnectCommandRefusalSaysWhy(t *testing.T) {
	cases := map[string]struct{ command, says string }{
		"a shell wrapper is named as one":    {"sh -c", "would become a command on the login node"},
		"nc -e is named as running programs": {"nc -e /bin/sh", "-e runs a program"},
		"another program is not a netcat":    {"cat", "is not nc, ncat or netcat"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := validate.ParsePolicy([]byte(sshNode("ForwardMode: exec\nExecConnectCommand: "+strconv.Quote(tc.command)+"\n")), validate.CredentialRules{})
			if len(errs) != 1 || errs[0].Field != ssh.Child("ExecConnectCommand").String() || !strings.Contains(errs[0].Detail, tc.says) {
				t.Errorf("errors = %v, want one at ExecConnectCommand saying %q", errs, tc.says)
			}
		})
	}
}

func TestBastion(t *testing.T) {
	bastion := ssh.Child("Bastion")
	cases := map[string]struct {
		bastion string
		want    []vt.Err
	}{
		"no bastion is valid":                           {bastion: ""},
		"a bastion with only its Host is valid":         {bastion: "Host: bastion.hpc.example.org"},
		"a bastion with its own port and user is valid": {bastion: "Host: bastion.hpc.example.org\n  Port: 2222\n  User: alice-jump"},
		"a bastion that is an IP literal is valid":      {bastion: "Host: \"fd00::23\""},
		"a bastion Host carrying an ssh option is refused": {bastion: "Host: \"bastion -oProxyCommand=x\"",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: bastion.Child("Host").String(), Value: "bastion -oProxyCommand=x"}}},
		"a bastion Host that is the metadata service is refused": {bastion: "Host: 169.254.169.254",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: bastion.Child("Host").String(), Value: "169.254.169.254"}}},
		"a bastion Host whose last label is all digits is refused": {bastion: "Host: 1.2.3.4.5",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: bastion.Child("Host").String(), Value: "1.2.3.4.5"}}},
		"a bastion User with a shell character is refused": {bastion: "Host: b.example.org\n  User: \"alice;id\"",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: bastion.Child("User").String(), Value: "alice;id"}}},
		"a bastion port out of range is refused": {bastion: "Host: b.example.org\n  Port: 70000",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: bastion.Child("Port").String(), Value: 70000}}},
		"a bastion port or user without its Host is refused": {bastion: "User: alice",
			want: []vt.Err{{Type: field.ErrorTypeRequired, Field: bastion.Child("Host").String(), Value: ""}}},
		"a misspelt bastion key is refused by the strict decoder": {bastion: "Hostname: b.example.org",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: bastion.Child("Hostname").String(), Value: "Hostname"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := ""
			if tc.bastion != "" {
				doc = "Bastion:\n  " + tc.bastion + "\n"
			}
			_, errs := validate.ParsePolicy([]byte(sshNode(doc)), validate.CredentialRules{})
			vt.Expect(t, errs, tc.want)
		})
	}
}

// TestBastionHostFollowsTheLoginHostRule runs the shared host table against Bastion.Host:
// the bastion is dialled by the shadow as LoginHost is, so each verdict is the LoginHost one.
// An empty Host is the one exception: it means no bastion.
func TestBastionHostFollowsTheLoginHostRule(t *testing.T) {
	for name, tc := range vt.HostCases(t) {
		if tc.Host == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			_, errs := validate.ParsePolicy([]byte(sshNode("Bastion:\n  Host: "+strconv.Quote(tc.Host)+"\n")), validate.CredentialRules{})
			if got := len(errs) == 0; got != tc.ByShadow {
				t.Errorf("Bastion.Host %q admitted %v, want %v (as LoginHost): %v", tc.Host, got, tc.ByShadow, errs)
			}
		})
	}
}

func TestProxyRefusalsPointToBastion(t *testing.T) {
	for _, opt := range []string{"ProxyJump=bastion.example.org", "ProxyCommand=nc"} {
		_, errs := validate.ParsePolicy([]byte(sshNode("ExtraOptions:\n- "+opt+"\n")), validate.CredentialRules{})
		if len(errs) != 1 || !strings.Contains(errs[0].Detail, "SSH.Bastion") {
			t.Errorf("%s: errors %v, want one pointing to SSH.Bastion", opt, errs)
		}
	}
}
