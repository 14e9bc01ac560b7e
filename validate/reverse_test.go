package validate_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/validate"
	vt "github.com/interlink-hq/shadowgate/validate/validatetest"
)

// TestReverseDestinations judges Reverse.AllowedDestinations on testPolicy's own-vk (the
// defaults: the pod's own namespace only), dest-vk (also namespace shared, example.org and two
// CIDRs) and none-vk (namespace shared only), for a pod of namespace user.
func TestReverseDestinations(t *testing.T) {
	pol := mustPolicy(t, testPolicy)
	p := field.NewPath("metadata", "annotations").Key(validate.AnnotationReverseForwards).String()
	cases := map[string]struct {
		node, entry string
		refused     bool
		detail      string // a substring of the refusal
	}{
		"a bare name is the pod's own namespace's Service":          {node: "own-vk", entry: "db:5432"},
		"a name qualified with the pod's namespace is admitted":     {node: "own-vk", entry: "db.user:5432"},
		"the .svc form of the pod's namespace is admitted":          {node: "own-vk", entry: "db.user.svc:5432"},
		"the full name in the pod's namespace is admitted":          {node: "own-vk", entry: "db.user.svc.cluster.local:5432"},
		"a StatefulSet member of the pod's namespace is admitted":   {node: "own-vk", entry: "db-0.db.user.svc.cluster.local:5432"},
		"case does not matter to DNS or to the rule":                {node: "own-vk", entry: "DB.User.SVC.Cluster.Local:5432"},
		"another tenant's Service is refused":                       {node: "own-vk", entry: "db.victim.svc.cluster.local:5432", refused: true, detail: "add victim to Network.SSH.Reverse.AllowedDestinations.Namespaces"},
		"another tenant's Service by short name is refused":         {node: "own-vk", entry: "db.victim:5432", refused: true, detail: "namespace victim"},
		"etcd in kube-system is refused":                            {node: "own-vk", entry: "etcd.kube-system.svc:2379", refused: true, detail: "namespace kube-system"},
		"the API server's Service is refused":                       {node: "own-vk", entry: "6443:kubernetes.default.svc:443", refused: true, detail: "namespace default"},
		"the shadow namespace's Services are refused":               {node: "own-vk", entry: "x.user-shadow:8080", refused: true, detail: "namespace user-shadow"},
		"an IP address is refused without CIDRs":                    {node: "own-vk", entry: "10250:10.0.0.5:10250", refused: true, detail: "AllowedDestinations.CIDRs"},
		"an IPv6 address is refused without CIDRs":                  {node: "own-vk", entry: "8080:[fd00::5]:80", refused: true, detail: "AllowedDestinations.CIDRs"},
		"localhost is the shadow pod's loopback, refused":           {node: "own-vk", entry: "8080:localhost:80", refused: true, detail: "127.0.0.1"},
		"a name outside the cluster is refused without a suffix":    {node: "own-vk", entry: "8443:api.example.org.eu.int:443", refused: true, detail: "NameSuffixes"},
		"a pod DNS name is no Service name":                         {node: "own-vk", entry: "8080:10-0-0-5.user.pod.cluster.local:80", refused: true, detail: "NameSuffixes"},
		"a listed namespace is admitted":                            {node: "dest-vk", entry: "db.shared.svc:5432"},
		"the pod's namespace stays allowed beside a list":           {node: "dest-vk", entry: "db:5432"},
		"a name under a listed suffix is admitted":                  {node: "dest-vk", entry: "8443:s3.example.org:443"},
		"the suffix itself is admitted":                             {node: "dest-vk", entry: "8443:example.org:443"},
		"a suffix matches whole labels only":                        {node: "dest-vk", entry: "8443:evilexample.org:443", refused: true, detail: "namespace org"},
		"an address inside a CIDR is admitted":                      {node: "dest-vk", entry: "8080:10.20.3.4:80"},
		"an IPv6 address inside a CIDR is admitted":                 {node: "dest-vk", entry: "8080:[fd00:20::9]:80"},
		"an IPv4-mapped address is judged as its IPv4":              {node: "dest-vk", entry: "8080:[::ffff:10.20.3.4]:80"},
		"an address outside the CIDRs is refused":                   {node: "dest-vk", entry: "8080:10.21.0.1:80", refused: true, detail: "10.21.0.1 is in none of AllowedDestinations.CIDRs [10.20.0.0/16 fd00:20::/64]"},
		"with PodNamespace off a bare name is refused":              {node: "none-vk", entry: "db:5432", refused: true, detail: "namespace user"},
		"with PodNamespace off a listed namespace is still allowed": {node: "none-vk", entry: "db.shared:5432"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, d := validate.Pod(podOn(tc.node, ann(fwd, tc.entry)), validate.Config{Policy: pol})
			var want []vt.Err
			if tc.refused {
				want = []vt.Err{{Type: field.ErrorTypeInvalid, Field: p, Value: tc.entry}}
			}
			vt.Expect(t, d.Errors, want)
			if tc.refused && len(d.Errors) == 1 {
				msg := d.Errors[0].Error()
				for _, part := range []string{"virtual node " + tc.node, tc.detail} {
					if !strings.Contains(msg, part) {
						t.Errorf("refusal %q does not say %q", msg, part)
					}
				}
			}
		})
	}
}
