package e2e

import (
	"strings"
	"testing"
	"time"
)

// A pod admitted with a SOCKS port (cern-vk allows SOCKS) gets an admission warning and,
// once stored, a Warning Event ReverseSocksProxy.
func TestSocksProxyPodGetsAWarningAndAnEvent(t *testing.T) {
	createNamespaces(t, "socks")
	p := offloaded{name: "crawler", namespace: "socks", node: "cern-vk", annotations: map[string]string{socks: "1080"}}
	r := kubectl(t, p.json(), "apply", "-f", "-")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Output())
	}
	expectContains(t, r.Stderr, "Warning: metadata.annotations[interlink.eu/reverse-socks-port]: the SOCKS5 proxy on port 1080")
	eventually(t, 15*time.Second, "a Warning Event ReverseSocksProxy on the pod", func() (bool, string) {
		out := mustKubectl(t, "", "get", "events", "-n", "socks", "--field-selector",
			"involvedObject.kind=Pod,involvedObject.name=crawler,reason=ReverseSocksProxy,type=Warning", "-o", "custom-columns=NOTE:.message", "--no-headers")
		return strings.Contains(out, "port 1080"), out
	})
}
