package translate

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// metadataAddresses are cloud metadata services that are not link-local.
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"), // AWS, over IPv6
}

// metadataNames are the names of the cloud metadata services.
var metadataNames = []string{"metadata.google.internal", "metadata.goog"}

// destination returns why a cluster may not connect to host (an IP address
// or a DNS name, as a socket address holds it) at port, or nil.
func (c checker) destination(host string, port uint32) error {
	h := strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if ip, ok := parseIP(h); ok {
		switch {
		case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
			return fmt.Errorf("%q is link-local (169.254.0.0/16, fe80::/10): the node's own services, such as the cloud metadata service, "+
				"which answer with the credentials of the node or the pod", host)
		case slices.Contains(metadataAddresses, ip):
			return fmt.Errorf("%q is a cloud metadata service, which answers with the credentials of the node or the pod", host)
		case (ip.IsLoopback() || ip.IsUnspecified()) && port == proxy.AdminPort:
			// The admin interface listens on 127.0.0.1 alone: another
			// address at its port is another host's.
			return adminPort(host)
		case slices.ContainsFunc(c.pol.Hosts, func(o string) bool { a, ok := parseIP(o); return ok && a == ip }):
			return operatorsOwn(host)
		}
		return nil
	}
	switch {
	case slices.Contains(metadataNames, h):
		return fmt.Errorf("%q is a cloud metadata service, which answers with the credentials of the node or the pod", host)
	case port == proxy.AdminPort:
		// Any name may resolve to loopback: localhost and its kin, a name
		// below .localhost, a public name whose record says 127.0.0.1, an
		// ExternalName Service. The policy does not resolve names, so no
		// name may be reached at the admin port.
		return adminPortByName(host)
	case c.operatorName(h):
		return operatorsOwn(host)
	}
	return nil
}

func adminPortByName(host string) error {
	return fmt.Errorf("%q at port %d: any host name may resolve to loopback, where port %d is the proxy's own admin interface, which an EnvoyConfig may not reach; "+
		"no host name may be reached at that port (an IP address other than loopback may)", host, proxy.AdminPort, proxy.AdminPort)
}

func operatorsOwn(host string) error {
	return fmt.Errorf("%q is the operator's: its xDS, webhook and metrics endpoints, which a fleet's proxies may not relay to", host)
}

func adminPort(host string) error {
	return fmt.Errorf("%q at port %d is the proxy's own admin interface, which an EnvoyConfig may not reach", host, proxy.AdminPort)
}

// operatorName reports whether the DNS name h leads to the operator: one
// of its names, or any name in its namespace, as a pod's resolver completes
// it: <x>.<namespace> (the search path adds svc.<domain>), and
// <x>.<namespace>.svc[.<domain>] or <x>.<namespace>.pod[.<domain>], with
// any labels before. A name without a dot resolves in the proxy's own
// namespace: the operator's, for a fleet there.
func (c checker) operatorName(h string) bool {
	for _, o := range c.pol.Hosts {
		if strings.ToLower(strings.TrimSuffix(o, ".")) == h {
			return true
		}
	}
	ns := c.pol.Namespace
	if ns == "" {
		return false
	}
	labels := strings.Split(h, ".")
	if len(labels) == 1 {
		return c.namespace == ns
	}
	for i := 1; i < len(labels); i++ {
		if labels[i] == ns && (i == len(labels)-1 || labels[i+1] == "svc" || labels[i+1] == "pod") {
			return true
		}
	}
	return false
}

var inetAtonPart = regexp.MustCompile(`^(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$`)

// parseIP reads an IP address as the resolvers Envoy uses may: in its
// standard form (with a zone, or IPv4 mapped into IPv6, which is unmapped),
// or in the forms of inet_aton, which getaddrinfo accepts for a host name:
// one to four parts, each decimal, octal (0...) or hexadecimal (0x...),
// the last filling the remaining bytes (2852039166, 0xa9fea9fe,
// 0251.0376.0251.0376 and 169.254.43518 are all 169.254.169.254).
func parseIP(h string) (netip.Addr, bool) {
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.WithZone("").Unmap(), true
	}
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var (
		v    uint64
		seen int
	)
	for i, p := range parts {
		if !inetAtonPart.MatchString(p) {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(p, 0, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		bits := 8
		if i == len(parts)-1 {
			bits = 8 * (4 - seen)
		}
		if n >= 1<<bits {
			return netip.Addr{}, false
		}
		v = v<<bits | n
		seen++
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}
