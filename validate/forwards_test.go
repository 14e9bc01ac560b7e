package validate_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

func TestForwardHosts(t *testing.T) {
	p := field.NewPath("metadata", "annotations").Key(validate.AnnotationReverseForwards)
	refused := func(entry string) []vt.Err {
		return []vt.Err{{Type: field.ErrorTypeInvalid, Field: p.String(), Value: entry}}
	}
	cases := map[string]struct {
		entry string
		want  []vt.Err
	}{
		"a Service IP written a.b.c.d is admitted":       {entry: "6443:10.96.0.1:443"},
		"a Service name is admitted":                     {entry: "minio.user.svc.cluster.local:9000"},
		"a name with a numeric label is a name":          {entry: "8080:web.0x1f.example.org:80"},
		"a name starting with digits is a name":          {entry: "8080:1e100.net:80"},
		"a ULA Service IP is admitted":                   {entry: "8080:[fd00::1]:80"},
		"a NAT64 address of a public IPv4 is admitted":   {entry: "8080:[64:ff9b::808:808]:80"},
		"a cloud metadata name is refused by name":       {entry: "8080:metadata.google.internal:80", want: refused("8080:metadata.google.internal:80")},
		"Azure's WireServer is refused":                  {entry: "8080:168.63.129.16:80", want: refused("8080:168.63.129.16:80")},
		"a 6to4 metadata address is refused":             {entry: "8080:[2002:a9fe:a9fe::1]:80", want: refused("8080:[2002:a9fe:a9fe::1]:80")},
		"169.254.169.254 is refused":                     {entry: "8080:169.254.169.254:80", want: refused("8080:169.254.169.254:80")},
		"a three-part shorthand of it is refused":        {entry: "8080:169.254.43518:80", want: refused("8080:169.254.43518:80")},
		"a hex shorthand of it is refused":               {entry: "8080:0xa9.0xfe.0xa9.0xfe:80", want: refused("8080:0xa9.0xfe.0xa9.0xfe:80")},
		"an upper-case hex shorthand is refused":         {entry: "8080:0XA9.0XFE.0XA9.0XFE:80", want: refused("8080:0XA9.0XFE.0XA9.0XFE:80")},
		"an octal shorthand of it is refused":            {entry: "8080:0251.0376.0251.0376:80", want: refused("8080:0251.0376.0251.0376:80")},
		"a single 32-bit number is refused":              {entry: "8080:2852039166:80", want: refused("8080:2852039166:80")},
		"a single hex number is refused":                 {entry: "8080:0xa9fea9fe:80", want: refused("8080:0xa9fea9fe:80")},
		"a loopback shorthand is refused":                {entry: "8080:0x7f.1:80", want: refused("8080:0x7f.1:80")},
		"a harmless shorthand is refused too":            {entry: "8080:10.96.1:80", want: refused("8080:10.96.1:80")},
		"a leading zero, octal to the C library":         {entry: "8080:10.96.0.010:80", want: refused("8080:10.96.0.010:80")},
		"numbers that are no address are refused":        {entry: "8080:1.2.3.256:80", want: refused("8080:1.2.3.256:80")},
		"a label 08, octal to nobody, is refused":        {entry: "8080:08.1:80", want: refused("8080:08.1:80")},
		"five numbers are refused":                       {entry: "8080:1.2.3.4.5:80", want: refused("8080:1.2.3.4.5:80")},
		"an IPv4-mapped metadata address is refused":     {entry: "8080:[::ffff:169.254.169.254]:80", want: refused("8080:[::ffff:169.254.169.254]:80")},
		"a NAT64 metadata address is refused":            {entry: "8080:[64:ff9b::a9fe:a9fe]:80", want: refused("8080:[64:ff9b::a9fe:a9fe]:80")},
		"an IPv4-compatible metadata address is refused": {entry: "8080:[::169.254.169.254]:80", want: refused("8080:[::169.254.169.254]:80")},
		"AWS's IPv6 metadata address is refused":         {entry: "8080:[fd00:ec2::254]:80", want: refused("8080:[fd00:ec2::254]:80")},
		"AWS's IPv6 metadata address in full is refused": {entry: "8080:[fd00:0ec2:0:0:0:0:0:0254]:80", want: refused("8080:[fd00:0ec2:0:0:0:0:0:0254]:80")},
		"the EKS Pod Identity Agent's IPv6 is refused":   {entry: "8080:[fd00:ec2::23]:80", want: refused("8080:[fd00:ec2::23]:80")},
		"Google Cloud's IPv6 metadata is refused":        {entry: "8080:[fd20:ce::254]:80", want: refused("8080:[fd20:ce::254]:80")},
		"Oracle Cloud's IPv6 metadata is refused":        {entry: "8080:[fd00:c1::a9fe:a9fe]:80", want: refused("8080:[fd00:c1::a9fe:a9fe]:80")},
		"Alibaba Cloud's metadata address is refused":    {entry: "8080:100.100.100.200:80", want: refused("8080:100.100.100.200:80")},
		"the unspecified address is refused":             {entry: "8080:0.0.0.0:80", want: refused("8080:0.0.0.0:80")},
		"a shorthand of the unspecified address":         {entry: "8080:0:80", want: refused("8080:0:80")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := validate.ParseForwards(tc.entry, "user", p)
			vt.Expect(t, errs, tc.want)
		})
	}
}

func TestNumericShorthandMessage(t *testing.T) {
	p := field.NewPath("f")
	cases := map[string]struct{ entry, says string }{
		"a shorthand names the address it reads as":  {"8080:0251.0376.0251.0376:80", "reads as the address 169.254.169.254"},
		"a leading zero shows the octal surprise":    {"8080:10.96.0.010:80", "reads as the address 10.96.0.8"},
		"numbers that are no address say what to do": {"8080:1.2.3.256:80", "write the address as a.b.c.d, or use a DNS name"},
		"a metadata address says which service":      {"8080:[fd00:ec2::254]:80", "AWS's instance metadata service"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := validate.ParseForwards(tc.entry, "user", p)
			if len(errs) != 1 || !strings.Contains(errs[0].Detail, tc.says) {
				t.Errorf("errors = %v, want one saying %q", errs, tc.says)
			}
		})
	}
}

func TestBindAddresses(t *testing.T) {
	p := field.NewPath("metadata", "annotations").Key(validate.AnnotationReverseBind)
	cases := map[string]struct {
		bind string
		want []vt.Err
	}{
		"127.0.10.1 is admitted":                    {bind: "127.0.10.1"},
		"127/8's network address connects on Linux": {bind: "127.0.0.0"},
		"an address ending in .0 connects on Linux": {bind: "127.1.2.0"},
		"127.255.255.254 is admitted":               {bind: "127.255.255.254"},
		"127.255.255.255, the broadcast, is refused": {bind: "127.255.255.255",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: p.String(), Value: "127.255.255.255"}}},
		"the broadcast written IPv4-mapped is refused": {bind: "::ffff:127.255.255.255",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: p.String(), Value: "::ffff:127.255.255.255"}}},
		"127.0.0.1 is refused": {bind: "127.0.0.1",
			want: []vt.Err{{Type: field.ErrorTypeInvalid, Field: p.String(), Value: "127.0.0.1"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := validate.ParseBind(tc.bind, p)
			vt.Expect(t, errs, tc.want)
			if len(errs) > 0 && !strings.Contains(errs[0].Detail, "give another 127.x.y.z address") {
				t.Errorf("detail %q does not say what to do", errs[0].Detail)
			}
		})
	}
}

func TestDuplicateListenPortsGetDistinctSuggestions(t *testing.T) {
	_, errs := validate.ParseForwards("10000:a.b:1 10001:c.d:2 10000:e.f:3 10000:g.h:4", "user", field.NewPath("f"))
	want := []string{"as in 10002:e.f:3", "as in 10003:g.h:4"}
	if len(errs) != len(want) {
		t.Fatalf("errors = %v, want %d", errs, len(want))
	}
	for i, w := range want {
		if !strings.Contains(errs[i].Detail, w) {
			t.Errorf("error %d = %q, want it to suggest %q", i, errs[i].Detail, w)
		}
	}
}
