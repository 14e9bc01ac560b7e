package syntax_test

import (
	"testing"

	"github.com/interlink-hq/shadowgate/validate/syntax"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

func TestChecks(t *testing.T) {
	cases := map[string]struct {
		check func(string) bool
		value string
		want  bool
	}{
		"a plain login name is a user name":            {syntax.UserName, "alice.b-c_1", true},
		"a login name starting with a dash is refused": {syntax.UserName, "-oProxyCommand", false},
		"a login name with a space is refused":         {syntax.UserName, "alice bob", false},
		"a principal with a realm is accepted":         {syntax.Principal, "alice@CERN.CH", true},
		"a service principal is accepted":              {syntax.Principal, "host/login.example.org@EXAMPLE.ORG", true},
		"a principal without a realm is refused":       {syntax.Principal, "alice", false},
		"python3 is a program":                         {syntax.Program, "python3", true},
		"an absolute path is a program":                {syntax.Program, "/usr/sbin/sshd", true},
		"a path climbing out is refused":               {syntax.Program, "/usr/../tmp/x", false},
		"a program with an argument is refused":        {syntax.Program, "python3 -c", false},
		"Key=Value is an ssh option":                   {syntax.SSHOption, "Ciphers=aes256-gcm@openssh.com,chacha20-poly1305@openssh.com", true},
		"an option with a space is refused":            {syntax.SSHOption, "Compression=yes -oProxyCommand=x", false},
		"an option without a value is refused":         {syntax.SSHOption, "Compression", false},
		"an option with a quote is refused":            {syntax.SSHOption, "User='x'", false},
		"an image reference is accepted":               {syntax.Image, "ghcr.io/interlink-hq/interlink/ssh-tunnel:0.6.0", true},
		"an image with a space is refused":             {syntax.Image, "ghcr.io/x y", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.check(tc.value); got != tc.want {
				t.Errorf("check(%q) = %v, want %v", tc.value, got, tc.want)
			}
		})
	}
}

func TestSSHOptionKey(t *testing.T) {
	cases := map[string]struct{ option, want string }{
		"Key=Value gives the key as written":         {"PKCS11Provider=/x.so", "PKCS11Provider"},
		"Key value gives the key":                    {"ProxyCommand nc", "ProxyCommand"},
		"a tab ends the key":                         {"Hostname\tx", "Hostname"},
		"leading whitespace is skipped, as ssh does": {"  LocalCommand=id", "LocalCommand"},
		"a quoted key is read without its quote":     {`"RemoteForward"=1`, "RemoteForward"},
		"an option without a value is its key":       {"ForwardAgent", "ForwardAgent"},
		"an empty key is empty":                      {"=x", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := syntax.SSHOptionKey(tc.option); got != tc.want {
				t.Errorf("SSHOptionKey(%q) = %q, want %q", tc.option, got, tc.want)
			}
		})
	}
}

func TestHostTable(t *testing.T) {
	for name, tc := range vt.HostCases(t) {
		t.Run(name, func(t *testing.T) {
			for use, want := range map[syntax.HostUse]bool{syntax.DialedByShadow: tc.ByShadow, syntax.DialedByLoginNode: tc.ByLoginNode} {
				if ok, why := syntax.Host(tc.Host, use); ok != want {
					t.Errorf("Host(%q, %v) = %v (%s), want %v", tc.Host, use, ok, why, want)
				}
			}
		})
	}
}

func TestConnectCommandTable(t *testing.T) {
	for name, tc := range vt.ConnectCommandCases(t) {
		t.Run(name, func(t *testing.T) {
			if ok, why := syntax.ConnectCommand(tc.Command); ok != tc.OK {
				t.Errorf("ConnectCommand(%q) = %v (%s), want %v", tc.Command, ok, why, tc.OK)
			}
		})
	}
}

func TestHostLength(t *testing.T) {
	for name, tc := range map[string]struct {
		host string
		want bool
	}{
		"a host of 253 characters is a host":  {long(253), true},
		"a host of 254 characters is refused": {long(254), false},
	} {
		t.Run(name, func(t *testing.T) {
			if ok, why := syntax.Host(tc.host, syntax.DialedByLoginNode); ok != tc.want {
				t.Errorf("Host(<%d characters>) = %v (%s), want %v", len(tc.host), ok, why, tc.want)
			}
		})
	}
}

func long(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
		if i%60 == 59 {
			b[i] = '.'
		}
	}
	return string(b)
}
