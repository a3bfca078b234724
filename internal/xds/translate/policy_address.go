package translate

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// metadataService is a cloud provider's instance metadata service or host
// agent that a pod reaches from its node: it answers with the credentials
// of the node or the pod, or with the platform's own configuration.
type metadataService struct {
	// host is an IP address or a DNS name, lower case, without a final dot.
	host string
	// what it is, and the provider's documentation that says where it is
	// (the page's title, and its address).
	what, source, url string
}

// metadataServices are the cloud metadata services and host agents that are
// not link-local, each with the provider's page that documents it. Those on
// 169.254.0.0/16 and fe80::/10 are refused as link-local already, whatever
// their provider: 169.254.169.254 (the instance metadata service of AWS,
// Google Cloud, Azure, Oracle Cloud, IBM Cloud, OpenStack, DigitalOcean,
// Hetzner, Huawei Cloud and most others), AWS's ECS task metadata and
// credentials (169.254.170.2) and EKS Pod Identity Agent (169.254.170.23).
// A name is refused in every form a resolver reads as that name (case, a
// final dot); an address in every notation parseIP reads. The short name
// "metadata" is the form a node's search domain (google.internal on Compute
// Engine) completes. The fleet's egress NetworkPolicy closes the addresses
// (MetadataPrefixes) at the network layer too, whatever a name resolves to.
var metadataServices = []metadataService{
	{"metadata.google.internal", "Google Cloud's metadata server", "Compute Engine documentation: View and query VM metadata",
		"https://cloud.google.com/compute/docs/metadata/querying-metadata"},
	{"metadata.goog", "Google Cloud's metadata server", "Compute Engine documentation: About VM metadata",
		"https://cloud.google.com/compute/docs/metadata/overview"},
	{"metadata", "Google Cloud's metadata server by its short name", "Compute Engine documentation: About VM metadata",
		"https://cloud.google.com/compute/docs/metadata/overview"},
	{"fd20:ce::254", "Google Cloud's metadata server over IPv6", "Compute Engine documentation: About VM metadata",
		"https://cloud.google.com/compute/docs/metadata/overview"},
	{"fd00:ec2::254", "AWS's instance metadata service over IPv6", "Amazon EC2 User Guide: Retrieve instance metadata",
		"https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html"},
	{"fd00:ec2::23", "the EKS Pod Identity Agent over IPv6, which hands out pods' AWS credentials", "Amazon EKS User Guide: Set up the Amazon EKS Pod Identity Agent",
		"https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html"},
	{"168.63.129.16", "Azure's WireServer, the host's channel to the platform (VM agent, DHCP, DNS)", "Azure Virtual Network documentation: What is IP address 168.63.129.16?",
		"https://learn.microsoft.com/en-us/azure/virtual-network/what-is-ip-address-168-63-129-16"},
	{"192.0.0.192", "Oracle's instance metadata service (Compute Cloud at Customer, Compute Classic)", "Oracle Cloud at Customer documentation: Retrieve Predefined Instance Metadata",
		"https://docs.oracle.com/en/cloud/cloud-at-customer/occ-get-started/retrieve-predefined-instance-metadata.html"},
	{"api.metadata.cloud.ibm.com", "IBM Cloud's VPC instance metadata service by its name", "IBM Cloud API Docs: VPC Instance Metadata API",
		"https://cloud.ibm.com/apidocs/vpc-metadata"},
	{"100.100.100.200", "Alibaba Cloud's instance metadata service", "Alibaba Cloud Elastic Compute Service documentation: Instance metadata",
		"https://www.alibabacloud.com/help/en/ecs/user-guide/view-instance-metadata"},
	{"metadata.tencentyun.com", "Tencent Cloud's instance metadata service", "Tencent Cloud Virtual Machine documentation: Querying Instance Metadata",
		"https://www.tencentcloud.com/document/product/213/4934"},
	{"100.80.80.80", "UCloud's (SurferCloud's) metadata server", "SurferCloud UHost documentation: Metadata Server",
		"https://www.surfercloud.com/docs/uhost/guide/metadata/metadata-server"},
	{"100.96.0.96", "Volcano Engine's instance metadata service", "Volcano Engine ECS documentation: View instance metadata",
		"https://www.volcengine.com/docs/6396/113780"},
}

// linkLocal are the link-local ranges, where every node's own services
// answer (the metadata services among them).
var linkLocal = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}

// MetadataPrefixes are the ranges no proxy may reach, as a NetworkPolicy
// closes them: the link-local ranges, and each metadata service that is not
// link-local by its address (/32 or /128).
func MetadataPrefixes() []netip.Prefix {
	out := slices.Clone(linkLocal)
	for _, m := range metadataServices {
		if a, err := netip.ParseAddr(m.host); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

// metadataServiceAt returns the metadata service at ip, or at the DNS name
// h (lower case, without a final dot) when ip is not valid.
func metadataServiceAt(ip netip.Addr, h string) (metadataService, bool) {
	for _, m := range metadataServices {
		if a, err := netip.ParseAddr(m.host); err == nil {
			if ip.IsValid() && a == ip {
				return m, true
			}
		} else if !ip.IsValid() && m.host == h {
			return m, true
		}
	}
	return metadataService{}, false
}

func metadataRefusal(host string, m metadataService) error {
	hint := ""
	if !strings.Contains(m.host, ".") && !strings.Contains(m.host, ":") {
		hint = fmt.Sprintf("; a Service called %s is reached by its name with its namespace (%s.<namespace>)", m.host, m.host)
	}
	return fmt.Errorf("%q is a cloud metadata service: %s (%s, %s), which answers with the credentials of the node or the pod, or the platform's own configuration%s",
		host, m.what, m.source, m.url, hint)
}

// destinationUse is how a field outside a cluster's endpoints names a
// destination of the proxy.
type destinationUse int

const (
	// socketDestination: an Address or a SocketAddress the proxy connects
	// or sends to.
	socketDestination destinationUse = iota
	// hostDestination: a host name, or host:port, that the proxy asks a
	// cluster to reach (a collector's host name, a CONNECT tunnel's target).
	hostDestination
	// uriDestination: a URL whose host the proxy asks a cluster to reach.
	uriDestination
)

// destinationFields are the fields, in every message the operator decodes,
// that name where the proxy connects or sends, beyond the addresses of a
// cluster and its endpoints (a Cluster's or ClusterLoadAssignment's
// socket addresses are all destinations, but for its bind config). Each is
// judged by the rules of a cluster's endpoints, in whatever resource it is:
// a listener's tracer and its collector, a stats sink, a DNS resolver.
// TestDestinationFieldsAreAllKnown fails on a field that may hold an
// address or a host and that is neither here nor known not to be a
// destination.
var destinationFields = map[protoreflect.FullName]destinationUse{
	"envoy.config.endpoint.v3.Endpoint.address":                   socketDestination,
	"envoy.config.endpoint.v3.Endpoint.AdditionalAddress.address": socketDestination,
	"envoy.config.endpoint.v3.Endpoint.HealthCheckConfig.address": socketDestination,
	"envoy.config.cluster.v3.Cluster.dns_resolvers":               socketDestination,
	"envoy.config.core.v3.DnsResolutionConfig.resolvers":          socketDestination,
	"envoy.config.metrics.v3.StatsdSink.address":                  socketDestination,
	"envoy.config.metrics.v3.DogStatsdSink.address":               socketDestination,
	"envoy.config.trace.v3.XRayConfig.daemon_endpoint":            socketDestination,
	// Envoy connects to the collector's cluster, and sends these as the
	// request's host; a cluster that relays by the host (an egress proxy)
	// would take the request there, so they are judged as destinations.
	"envoy.config.trace.v3.ZipkinConfig.collector_hostname":                           hostDestination,
	"envoy.config.trace.v3.DatadogConfig.collector_hostname":                          hostDestination,
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.TunnelingConfig.hostname": hostDestination,
	"envoy.config.core.v3.HttpUri.uri":                                                uriDestination,
}

// destinationsIn judges the destinations that m's fields name (those of
// destinationFields), at path at. Socket addresses are left to the rule of
// socket addresses in the resources where every one is a destination.
func (c checker) destinationsIn(m protoreflect.Message, at string) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		use, ok := destinationFields[fd.FullName()]
		if !ok {
			return true
		}
		name := field(at, string(fd.Name()))
		switch use {
		case socketDestination:
			if c.destinations {
				return true
			}
			if fd.IsList() {
				for i := range v.List().Len() {
					c.socketDestination(v.List().Get(i).Message().Interface(), name+"["+strconv.Itoa(i)+"]")
				}
			} else {
				c.socketDestination(v.Message().Interface(), name)
			}
		case hostDestination:
			host, port := splitHostPort(v.String())
			if err := c.destination(host, port); err != nil {
				c.refuse(name, err)
			}
		case uriDestination:
			u, err := url.Parse(v.String())
			if err != nil {
				c.refuse(name, fmt.Errorf("is not a URL whose host this check can judge: %w", err))
				return true
			}
			port, _ := strconv.ParseUint(u.Port(), 10, 16)
			if err := c.destination(u.Hostname(), uint32(port)); err != nil {
				c.refuse(name, err)
			}
		}
		return true
	})
}

// socketDestination judges the socket address that a (an Address or a
// SocketAddress) holds.
func (c checker) socketDestination(a proto.Message, at string) {
	var sa *corev3.SocketAddress
	switch t := a.(type) {
	case *corev3.Address:
		sa, at = t.GetSocketAddress(), at+".socket_address"
	case *corev3.SocketAddress:
		sa = t
	}
	if sa == nil {
		return // a pipe's path is a file, judged as one
	}
	if err := c.destination(sa.GetAddress(), sa.GetPortValue()); err != nil {
		c.refuse(field(at, "address"), err)
	}
}

// splitHostPort splits host:port, [host]:port or a bare host.
func splitHostPort(s string) (string, uint32) {
	if host, port, err := net.SplitHostPort(s); err == nil {
		p, _ := strconv.ParseUint(port, 10, 16)
		return host, uint32(p)
	}
	return s, 0
}

// destination returns why a cluster may not connect to host (an IP address
// or a DNS name, as a socket address holds it) at port, or nil.
func (c checker) destination(host string, port uint32) error {
	h := strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if ip, ok := parseIP(h); ok {
		switch {
		case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
			return fmt.Errorf("%q is link-local (169.254.0.0/16, fe80::/10): the node's own services, such as the cloud metadata service, "+
				"which answer with the credentials of the node or the pod", host)
		}
		if m, ok := metadataServiceAt(ip, ""); ok {
			return metadataRefusal(host, m)
		}
		switch {
		case (ip.IsLoopback() || ip.IsUnspecified()) && port == proxy.AdminPort:
			// The admin interface listens on 127.0.0.1 alone: another
			// address at its port is another host's.
			return adminPort(host)
		case slices.ContainsFunc(c.pol.Hosts, func(o string) bool { a, ok := parseIP(o); return ok && a == ip }):
			return operatorsOwn(host)
		}
		return c.pol.allowedAddress(host, ip)
	}
	if m, ok := metadataServiceAt(netip.Addr{}, h); ok {
		return metadataRefusal(host, m)
	}
	switch {
	case port == proxy.AdminPort:
		// Any name may resolve to loopback: localhost and its kin, a name
		// below .localhost, a public name whose record says 127.0.0.1, an
		// ExternalName Service. The policy does not resolve names, so no
		// name may be reached at the admin port.
		return adminPortByName(host)
	case c.operatorName(h):
		return operatorsOwn(host)
	}
	return c.pol.allowedName(host, h)
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

// ForFleet returns pol for the fleet of e (nil when the fleet has no
// Envoy): with the allowlist of its spec.egress.allowed.
func (pol Policy) ForFleet(e *examplev1.Envoy) Policy {
	pol.Allowed = nil
	if e != nil && e.Spec.Egress != nil {
		pol.Allowed = e.Spec.Egress.Allowed
	}
	return pol
}

// allowedAddress returns why the fleet's allowlist refuses ip (written as
// host), or nil: outside every one of its CIDRs.
func (pol Policy) allowedAddress(host string, ip netip.Addr) error {
	a := pol.Allowed
	if a == nil {
		return nil
	}
	for _, c := range a.CIDRs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Contains(ip) {
			return nil
		}
	}
	return fmt.Errorf("%q is outside the fleet's allowlist: its Envoy's spec.egress.allowed.cidrs (%s) hold no such address", host, listOrNone(a.CIDRs))
}

// allowedName returns why the fleet's allowlist refuses the DNS name h
// (lower case, without a final dot; written as host), or nil: it matches
// none of its domains, exactly or, for *.suffix, as a name below suffix.
func (pol Policy) allowedName(host, h string) error {
	a := pol.Allowed
	if a == nil {
		return nil
	}
	for _, d := range a.Domains {
		if suffix, ok := strings.CutPrefix(d, "*."); ok {
			if strings.HasSuffix(h, "."+suffix) {
				return nil
			}
		} else if h == d {
			return nil
		}
	}
	return fmt.Errorf("%q is outside the fleet's allowlist: its Envoy's spec.egress.allowed.domains (%s) match no such name", host, listOrNone(a.Domains))
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// allowlistIdentity is a string that differs between allowlists that judge
// differently.
func allowlistIdentity(a *examplev1.EnvoyEgressAllowlist) string {
	if a == nil {
		return "-"
	}
	return strings.Join(a.CIDRs, "\x00") + "\x02" + strings.Join(a.Domains, "\x00")
}

// endpointRefusal returns why the proxies of a fleet may not reach an
// endpoint address of a Service's EndpointSlice (in namespace ns) at port,
// or nil: the rule of a cluster's endpoints written in an EnvoyConfig.
// Kubernetes refuses loopback and link-local addresses in an EndpointSlice
// already; a hand-written slice may still hold any other address (a
// metadata service that is not link-local, one outside the allowlist) or,
// of type FQDN, any name.
func (pol Policy) endpointRefusal(ns, address string, port uint32) error {
	return checker{pol: pol, namespace: ns, destinations: true}.destination(address, port)
}
