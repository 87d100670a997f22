// CoreDNS for real test nodes, with only the plugins tools/k8s/nodes.py's Corefile uses: cluster DNS
// (kubernetes) for headless Services and Pods, nothing forwarded anywhere (no forward plugin is built in).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The directive order of CoreDNS's plugin.cfg, restricted to the plugins above.
func init() {
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "log", "cache", "hosts", "kubernetes"}
}

func main() {
	coremain.Run()
}
