package inject

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Every front-door host is one valid, lower-case label under the domain, whatever the pod's
// name, and no two pods or ports share one: names joined with hyphens alone would collide, and
// a pod made again under the same name is another pod.
func TestFrontDoorHostsAreOneLabelUnderTheDomainAndNeverShared(t *testing.T) {
	const domain = "apps.example.org"
	seen := map[string]string{}
	for _, c := range []struct {
		pod, ns string
		uid     types.UID
		port    int32
	}{
		{"a-b", "c", "u1", 80}, {"a", "b-c", "u1", 80}, // the same when joined
		{"jupyter.lab", "user", "u1", 8888}, {"jupyter-lab", "user", "u1", 8888}, // the same once cleaned
		{"notebook", "user", "u1", 8888}, {"notebook", "user", "u1", 6006},
		{"notebook", "user", "u2", 8888}, // the same pod name again, another pod
		{strings.Repeat("x", 253), strings.Repeat("n", 63), "u1", 65535},
		{strings.Repeat("x", 253), strings.Repeat("n", 63), "u1", 1},
		{"Z.Pod", "user", "u1", 443},
	} {
		host := FrontDoorHost(c.pod, c.ns, c.uid, c.port, domain)
		who := fmt.Sprintf("%s/%s (%s):%d", c.ns, c.pod, c.uid, c.port)
		label, rest, _ := strings.Cut(host, ".")
		if rest != domain {
			t.Errorf("%s: host %s is not one label under %s", who, host, domain)
		}
		if msgs := validation.IsDNS1123Label(label); len(msgs) > 0 {
			t.Errorf("%s: %s is no DNS label: %v", who, label, msgs)
		}
		if other, dup := seen[host]; dup {
			t.Errorf("%s and %s share host %s", who, other, host)
		}
		seen[host] = who
	}
}

func TestRouteNamesAreRecognisedOnlyWithAPort(t *testing.T) {
	for name, want := range map[string]bool{
		"notebook-user-8888": true, "notebook-user-65535": true, "notebook-user-1": true,
		"notebook-user": false, "notebook-user-": false, "notebook-user-0": false, "notebook-user-08888": false,
		"notebook-user-65536": false, "notebook-user-node": false, "notebook-user-8888x": false, "other-8888": false,
	} {
		if got := IsRouteName("notebook-user", name); got != want {
			t.Errorf("IsRouteName(notebook-user, %s) = %v, want %v", name, got, want)
		}
	}
	if got := RouteName("notebook-user", 8888); !IsRouteName("notebook-user", got) {
		t.Errorf("RouteName gives %s, which IsRouteName does not recognise", got)
	}
}
