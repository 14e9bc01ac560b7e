package syntax_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/interlink-hq/shadowgate/validate/syntax"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

// plainWord is the property every accepted host and command word has: only bytes no shell and
// no ssh option parser treats specially, and not an option.
func plainWord(s string) bool {
	return s != "" && !strings.HasPrefix(s, "-") &&
		strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:-/_+") == ""
}

func FuzzHost(f *testing.F) {
	for _, tc := range vt.HostCases(f) {
		f.Add(tc.Host)
	}
	f.Fuzz(func(t *testing.T, host string) {
		byShadow, _ := syntax.Host(host, syntax.DialedByShadow)
		byNode, _ := syntax.Host(host, syntax.DialedByLoginNode)
		if byNode && !byShadow {
			t.Fatalf("%q is a compute node but not a host the shadow may dial", host)
		}
		if !byShadow {
			return
		}
		if !plainWord(host) || len(host) > 253 {
			t.Fatalf("accepted host %q carries a special byte or is too long", host)
		}
		if addr, err := netip.ParseAddr(host); err == nil {
			a := addr.Unmap()
			if a.IsUnspecified() || a.IsLinkLocalUnicast() || (byNode && a.IsLoopback()) {
				t.Fatalf("accepted address %q (%s)", host, a)
			}
			return
		}
		labels := strings.Split(host, ".")
		if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
			t.Fatalf("accepted name %q whose last label is all digits", host)
		}
		for _, l := range labels {
			if len(l) == 0 || len(l) > 63 {
				t.Fatalf("accepted name %q with a label of %d characters", host, len(l))
			}
		}
	})
}

func FuzzConnectCommand(f *testing.F) {
	for _, tc := range vt.ConnectCommandCases(f) {
		f.Add(tc.Command)
	}
	f.Fuzz(func(t *testing.T, command string) {
		if ok, _ := syntax.ConnectCommand(command); !ok {
			return
		}
		words := strings.Split(command, " ")
		prog := words[0][strings.LastIndex(words[0], "/")+1:]
		if prog != "nc" && prog != "ncat" && prog != "netcat" {
			t.Fatalf("accepted %q, whose program is not a netcat", command)
		}
		for i, w := range words {
			if w == "" || (i > 0 && !plainWord(strings.TrimPrefix(w, "-"))) {
				t.Fatalf("accepted %q with the word %q", command, w)
			}
		}
	})
}
