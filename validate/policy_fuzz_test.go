package validate_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/validate"
)

// FuzzParse feeds arbitrary documents to the strict decoder: it must never panic, and a policy
// it accepts must validate again unchanged (decoding and validation agree).
func FuzzParsePolicy(f *testing.F) {
	if example, err := os.ReadFile("../manifests/examples/policy.yaml"); err == nil {
		f.Add(string(example))
	}
	for _, seed := range []string{
		sshNode(""), sshNode("Port: \"22\"\nExtraOptions: [1, {a: b}]\n"), "virtualNodes: []\n",
		"virtualNodes:\n  x: [1]\n", "- a\n- b\n", "virtualNodes: {a: {Network: {SSH: {Reverse: 5}}}}\n", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		p, errs := validate.ParsePolicy([]byte(doc), validate.CredentialRules{})
		if len(errs) > 0 {
			return
		}
		if again := validate.Policy(p, validate.CredentialRules{}, nil); len(again) > 0 {
			t.Fatalf("accepted policy fails validation: %v", again)
		}
	})
}

func FuzzExtraOption(f *testing.F) {
	for _, seed := range []string{"ServerAliveInterval=10", "Ciphers=+3des-cbc", "ProxyJump=x", "KexAlgorithms=-diffie-hellman-group1-sha1",
		"LogLevel=VERBOSE", "Compression=yes\x00", "IPQoS=ef", "User=root", "HostKeyAlgorithms=^ssh-ed25519"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, opt string) {
		doc := sshNode("ExtraOptions: [" + strconv.Quote(opt) + "]\n")
		if _, errs := validate.ParsePolicy([]byte(doc), validate.CredentialRules{}); len(errs) > 0 {
			return
		}
		key, value, ok := strings.Cut(opt, "=")
		if !ok || strings.ContainsFunc(opt, func(r rune) bool { return r <= ' ' || r > '~' || strings.ContainsRune("'\"\\$`;&|<>(){}*?!#~%", r) }) {
			t.Fatalf("accepted %q, which is not one Key=Value word of plain printable ASCII", opt)
		}
		switch strings.ToLower(key) {
		case "proxycommand", "localcommand", "proxyjump", "hostname", "user", "identityfile", "stricthostkeychecking":
			t.Fatalf("accepted %q", opt)
		}
		if !strings.HasPrefix(value, "-") {
			for _, name := range strings.Split(strings.TrimLeft(strings.ToLower(value), "+^"), ",") {
				switch name {
				case "3des-cbc", "hmac-md5", "diffie-hellman-group1-sha1", "ssh-rsa", "ssh-dss":
					t.Fatalf("accepted %q, which adds %s", opt, name)
				}
			}
		}
	})
}
