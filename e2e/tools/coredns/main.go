// Command coredns is CoreDNS with the plugins the local site's cluster DNS uses and no others,
// built as CoreDNS documents for a chosen set of plugins: the release binary's main with a
// shorter directive list. The cloud providers' plugins (route53, azure, clouddns), which bring
// most of the release binary's dependencies, are left out.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins the directives name, in the order of CoreDNS's plugin.cfg.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{"ready", "health", "errors", "log", "cache", "kubernetes"}
}

func main() { coremain.Run() }
