package validate_test

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/syntax"
)

// shellSafe is the property every accepted value has: only bytes that neither a shell nor
// ssh's option parser treats specially.
func shellSafe(s string) bool {
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-:[]", r)
		if !ok {
			return false
		}
	}
	return !strings.HasPrefix(s, "-")
}

var fuzzPath = field.NewPath("metadata", "annotations").Key(validate.AnnotationReverseForwards)

func FuzzParseForwards(f *testing.F) {
	for _, seed := range []string{
		"minio.user.svc.cluster.local:9000 6443:kubernetes.default.svc.cluster.local:443",
		"minio:9000", "8080:[fd00::1]:80", "[::1]:8080", "a:1 a:1", "x;rm:80", "$(id):9000",
		"node -oProxyCommand=x:22", "9000:minio:9000\n9001:redis:6379", "1:2:3:4", "",
		"8080:169.254.43518:80", "8080:0xa9.0xfe.0xa9.0xfe:80", "8080:0251.0376.0251.0376:80", "8080:2852039166:80",
		"8080:[fd00:ec2::254]:80", "8080:[64:ff9b::a9fe:a9fe]:80", "8080:10.96.0.1:80",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		forwards, errs := validate.ParseForwards(value, "user", fuzzPath)
		if len(errs) > 0 {
			return
		}
		seen := map[int]bool{}
		for _, entry := range strings.Fields(value) {
			if !shellSafe(entry) {
				t.Fatalf("accepted entry %q carries a special byte", entry)
			}
		}
		for _, fw := range forwards {
			if !shellSafe(fw.Host) || !shellSafe(fw.DialHost) {
				t.Fatalf("accepted host %q / %q carries a special byte", fw.Host, fw.DialHost)
			}
			if looksNumeric(fw.Host) {
				if addr, err := netip.ParseAddr(fw.Host); err != nil || !addr.Is4() || addr.IsLinkLocalUnicast() || addr.IsUnspecified() {
					t.Fatalf("accepted host %q, which the C library reads as an address", fw.Host)
				}
			}
			if addr, err := netip.ParseAddr(fw.Host); err == nil && (addr.Unmap().IsLinkLocalUnicast() || addr.IsUnspecified()) {
				t.Fatalf("accepted link-local or unspecified host %q", fw.Host)
			}
			if fw.ListenPort < 1024 || fw.ListenPort > 65535 || fw.Port < 1 || fw.Port > 65535 {
				t.Fatalf("accepted ports out of range: %+v", fw)
			}
			if seen[fw.ListenPort] {
				t.Fatalf("duplicate listen port accepted: %+v", forwards)
			}
			seen[fw.ListenPort] = true
		}
	})
}

// looksNumeric reports whether every dot-separated label of host is digits, or 0x and hex
// digits: what inet_aton might read as a number.
func looksNumeric(host string) bool {
	for _, label := range strings.Split(strings.ToLower(host), ".") {
		if rest, hex := strings.CutPrefix(label, "0x"); hex {
			if strings.Trim(rest, "0123456789abcdef") != "" {
				return false
			}
			continue
		}
		if label == "" || strings.Trim(label, "0123456789") != "" {
			return false
		}
	}
	return true
}

func FuzzParseBind(f *testing.F) {
	for _, seed := range []string{"127.0.10.1", "127.0.0.1", "::ffff:127.0.0.1", "::ffff:127.1.2.3", "10.0.0.1", "::1", "fe80::1%eth0", "127.0.0.1 ", "", "127.255.255.255", "::ffff:127.255.255.255"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		addr, errs := validate.ParseBind(value, fuzzPath)
		if len(errs) > 0 {
			return
		}
		if !shellSafe(value) || !shellSafe(addr.String()) {
			t.Fatalf("accepted bind %q carries a special byte", value)
		}
		if !addr.Is4() || addr.As4()[0] != 127 || addr.String() == "127.0.0.1" || addr.String() == "127.255.255.255" {
			t.Fatalf("accepted bind %q became %s", value, addr)
		}
	})
}

func FuzzComputeNode(f *testing.F) {
	for _, seed := range []string{"node07.hpc.example.org", "10.1.2.3", "fd00::7", "127.0.0.1", "::ffff:127.0.0.1", "0x7f.1", "1.2.3.4.5", "node07 -oProxyCommand=x", "node07$(id)", "-x", "a'b", "fe80::1%eth0", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, node string) {
		d := validate.NodeConfigMap(&corev1.ConfigMap{Data: map[string]string{validate.ComputeNodeKey: node}})
		ok, _ := syntax.Host(node, syntax.DialedByLoginNode)
		if d.Allowed() != (ok || node == "") {
			t.Fatalf("NodeConfigMap and syntax.Host disagree on %q", node)
		}
		if d.Allowed() && !shellSafe(node) {
			t.Fatalf("accepted compute node %q carries a special byte", node)
		}
	})
}
