package resource

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fleetdefaults "github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// Envoy's load-time rules: what Envoy refuses when it loads a resource,
// beyond the protos' own validation rules (ValidateAll). A proxy answers a
// resource that breaks one with a NACK, and since Envoy refuses a whole
// update for one bad resource, every proxy of the fleet keeps its old
// configuration. Each rule here is one that Envoy v1.40 (the image the
// bootstrap is validated against) applies in its listener manager, cluster
// manager, route table, HTTP connection manager or protobuf utilities; the
// table of cases in envoyrules_test.go gives Envoy's own message beside each,
// and a test loads every case into a real Envoy, which must refuse what the
// rules refuse, saying so, and load what they admit.
//
// The rules see one resource at a time. Those that need the fleet, such as
// two listeners on one address, are checked where the fleet is known:
// Parse for one EnvoyConfig, translate for the merged fleet.

// findings collects what is wrong with one resource, each naming its field.
type findings []string

func (f *findings) add(path, format string, args ...any) {
	*f = append(*f, join(path, fmt.Sprintf(format, args...)))
}

func join(path, msg string) string {
	if path == "" {
		return msg
	}
	return path + ": " + msg
}

func child(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func index(path, name string, i int) string { return fmt.Sprintf("%s[%d]", child(path, name), i) }

// checkLoad applies Envoy's load-time rules to m, a decoded resource of
// kind k: the rules of every resource, then its kind's (Kind.check).
func checkLoad(k Kind, m types.Resource) error {
	var f findings
	checkDurations(&f, m)
	checkRegexes(&f, m)
	checkStaticSecrets(&f, m)
	checkMatcherRegexes(&f, m)
	checkNesting(&f, m)
	checkDeprecated(&f, m)
	k.check(&f, m)
	if len(f) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(f, "; "))
}

// The load-time rules of each kind (Kind.check).

func checkListenerLoad(f *findings, m types.Resource) { checkListener(f, m.(*listenerv3.Listener)) }

func checkRouteConfigLoad(f *findings, m types.Resource) {
	checkRouteConfig(f, "", m.(*routev3.RouteConfiguration))
}

func checkClusterLoad(f *findings, m types.Resource) { checkCluster(f, m.(*clusterv3.Cluster)) }

func checkEndpointsLoad(f *findings, m types.Resource) {
	checkEndpointAddresses(f, "", m.(*endpointv3.ClusterLoadAssignment), true)
}

func checkSecretLoad(f *findings, m types.Resource) {
	if m.(*tlsv3.Secret).GetType() == nil {
		f.add("", "a secret needs its content: tls_certificate, validation_context, session_ticket_keys or generic_secret")
	}
}

// maxDurationSeconds is the largest duration Envoy takes: it counts
// durations in nanoseconds in an int64.
const maxDurationSeconds = 9223372036

// checkDurations: Envoy refuses a negative duration anywhere, and one too
// long to count in nanoseconds.
func checkDurations(f *findings, m proto.Message) {
	Walk(m, "", func(m proto.Message, path string) bool {
		d, ok := m.(*durationpb.Duration)
		if !ok {
			return true
		}
		switch {
		case d.GetSeconds() < 0 || d.GetNanos() < 0:
			f.add(path, "a duration must not be negative")
		case d.GetSeconds() > maxDurationSeconds:
			f.add(path, "a duration must be at most %ds", maxDurationSeconds)
		}
		return false
	})
}

// checkRegexes: every regular expression must compile in RE2 and fit the
// program size Envoy allows.
func checkRegexes(f *findings, m proto.Message) {
	Walk(m, "", func(m proto.Message, path string) bool {
		r, ok := m.(*matcherv3.RegexMatcher)
		if !ok {
			return true
		}
		limit, what := uint32(defaultMaxProgramSize), "Envoy's limit (re2.max_program_size.error_level)"
		if mps := r.GetGoogleRe2().GetMaxProgramSize(); mps != nil {
			limit, what = mps.GetValue(), "google_re2.max_program_size"
		}
		if err := checkRegex(r.GetRegex(), limit, what); err != nil {
			f.add(child(path, "regex"), "%v", err)
		}
		return false
	})
}

// An extension is a typed_config that Envoy looks up by its type: it takes
// one only where an extension of its kind belongs.
type extension struct {
	kind string // e.g. "network filter"
	// name is its factory's name, which Envoy's messages give.
	name     string
	terminal bool // a filter that must be last in its chain
}

// Kinds of extension, by where they go.
const (
	networkFilter   = "network filter"
	httpFilter      = "HTTP filter"
	listenerFilter  = "listener filter"
	downstreamTLS   = "downstream transport socket"
	upstreamTLS     = "upstream transport socket"
	accessLogger    = "access logger"
	compressionLib  = "compression library"
	protocolOptions = "cluster protocol options"
	tracer          = "tracer"
	clusterFilter   = "cluster filter"
)

// extensions holds every extension that extensions.go imports, by the full
// name of its configuration's type.
var extensions = map[protoreflect.FullName]extension{
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager": {networkFilter, "envoy.filters.network.http_connection_manager", true},
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy":                            {networkFilter, "envoy.filters.network.tcp_proxy", true},
	"envoy.extensions.filters.http.compressor.v3.Compressor":                            {httpFilter, "envoy.filters.http.compressor", false},
	"envoy.extensions.filters.http.cors.v3.Cors":                                        {httpFilter, "envoy.filters.http.cors", false},
	"envoy.extensions.filters.http.fault.v3.HTTPFault":                                  {httpFilter, "envoy.filters.http.fault", false},
	"envoy.extensions.filters.http.grpc_web.v3.GrpcWeb":                                 {httpFilter, "envoy.filters.http.grpc_web", false},
	"envoy.extensions.filters.http.health_check.v3.HealthCheck":                         {httpFilter, "envoy.filters.http.health_check", false},
	"envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit":                   {httpFilter, "envoy.filters.http.local_ratelimit", false},
	"envoy.extensions.filters.http.rbac.v3.RBAC":                                        {httpFilter, "envoy.filters.http.rbac", false},
	"envoy.extensions.filters.http.router.v3.Router":                                    {httpFilter, "envoy.filters.http.router", true},
	"envoy.extensions.filters.listener.http_inspector.v3.HttpInspector":                 {listenerFilter, "envoy.filters.listener.http_inspector", false},
	"envoy.extensions.filters.listener.original_dst.v3.OriginalDst":                     {listenerFilter, "envoy.filters.listener.original_dst", false},
	"envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol":                 {listenerFilter, "envoy.filters.listener.proxy_protocol", false},
	"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector":                   {listenerFilter, "envoy.filters.listener.tls_inspector", false},
	"envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext":                    {downstreamTLS, "envoy.transport_sockets.tls", false},
	"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext":                      {upstreamTLS, "envoy.transport_sockets.tls", false},
	"envoy.extensions.access_loggers.file.v3.FileAccessLog":                             {accessLogger, "envoy.access_loggers.file", false},
	"envoy.extensions.access_loggers.stream.v3.StdoutAccessLog":                         {accessLogger, "envoy.access_loggers.stdout", false},
	"envoy.extensions.access_loggers.stream.v3.StderrAccessLog":                         {accessLogger, "envoy.access_loggers.stderr", false},
	"envoy.extensions.compression.gzip.compressor.v3.Gzip":                              {compressionLib, "envoy.compression.gzip.compressor", false},
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions":                            {protocolOptions, "envoy.extensions.upstreams.http.v3.HttpProtocolOptions", false},
	// The tracers whose configurations the connection manager's protos link.
	"envoy.config.trace.v3.DatadogConfig":       {tracer, "envoy.tracers.datadog", false},
	"envoy.config.trace.v3.OpenTelemetryConfig": {tracer, "envoy.tracers.opentelemetry", false},
	"envoy.config.trace.v3.SkyWalkingConfig":    {tracer, "envoy.tracers.skywalking", false},
	"envoy.config.trace.v3.XRayConfig":          {tracer, "envoy.tracers.xray", false},
	"envoy.config.trace.v3.ZipkinConfig":        {tracer, "envoy.tracers.zipkin", false},
	// Envoy's one cluster filter that any linked type configures.
	"google.protobuf.Empty": {clusterFilter, "envoy.filters.upstream_network.reverse_tunnel_lifecycle", false},
}

// placed checks that a, the typed_config at path, is an extension of kind:
// Envoy finds no implementation for a configuration of another kind there
// ("Didn't find a registered implementation for 'x' with type URL: 'y'"),
// nor for none. optional extensions of another kind are skipped, as Envoy
// skips them. It returns the extension, and whether it is of kind.
func placed(f *findings, path string, a *anypb.Any, kind string, optional bool) (extension, bool) {
	if a == nil || a.GetTypeUrl() == "" {
		if !optional {
			f.add(path, "a %s needs a typed_config", kind)
		}
		return extension{}, false
	}
	typ := a.MessageName()
	ext, ok := extensions[typ]
	if ok && ext.kind == kind {
		return ext, true
	}
	if !optional {
		what := "is not an extension this operator serves"
		if ok {
			what = "is " + article(ext.kind)
		}
		f.add(path, "%s %s, not %s", typ, what, article(kind))
	}
	return extension{}, false
}

// article returns what, a kind of extension or filter chain, after its
// indefinite article.
func article(what string) string {
	if strings.HasPrefix(what, "HTTP") || strings.ContainsRune("aeiou", rune(what[0])) {
		return "an " + what
	}
	return "a " + what
}

// chainFilter is a filter of a network or HTTP filter chain.
type chainFilter struct {
	path, name string
	ext        extension
}

// checkTerminal: the last filter of a chain must be terminal (for HTTP, the
// router), and no other may be (Envoy: "terminal filter named x of type y
// must be the last filter in a z filter chain").
func checkTerminal(f *findings, chain string, filters []chainFilter) {
	for i, fl := range filters {
		last := i == len(filters)-1
		switch {
		case fl.ext.terminal && !last:
			f.add(fl.path, "%s (%s) ends %s filter chain, so it must be the last filter", fl.name, fl.ext.name, article(chain))
		case !fl.ext.terminal && last:
			f.add(fl.path, "%s (%s) cannot be the last filter of %s filter chain: it must be followed by a terminal filter", fl.name, fl.ext.name, article(chain))
		}
	}
}

// The names and addresses the bootstrap already uses: a resource of the
// fleet cannot have them.
var (
	staticListeners = map[string]bool{}
	staticClusters  = map[string]bool{}
	// adminAddress is where the admin interface listens. It binds its
	// socket without SO_REUSEPORT.
	adminAddress ListenerAddress
	// staticAddresses are the static listeners' addresses, by listener.
	staticAddresses = map[string][]ListenerAddress{}
)

func init() {
	b := proxy.Bootstrap(proxy.XDSServer{ClusterName: fleetdefaults.XDSClusterName, Host: "xds.invalid", Port: 1}, proxy.Overload{})
	admin := ListenerAddresses(&listenerv3.Listener{Address: b.GetAdmin().GetAddress(), EnableReusePort: wrapperspb.Bool(false)})
	adminAddress = admin[0]
	for _, l := range b.GetStaticResources().GetListeners() {
		staticListeners[l.GetName()] = true
		staticAddresses[l.GetName()] = ListenerAddresses(l)
	}
	for _, c := range b.GetStaticResources().GetClusters() {
		staticClusters[c.GetName()] = true
	}
}

// socketAddrPort returns a socket address as an IP address and port, or
// false when its address is not an IP address.
func socketAddrPort(sa *corev3.SocketAddress) (netip.AddrPort, bool) {
	ip, ok := parseIP(sa.GetAddress())
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, uint16(sa.GetPortValue())), true
}

// parseIP parses an IP address as Envoy does: in dotted decimal or IPv6
// notation, with a zone (%eth0, %2) only on a link-local IPv6 address.
// Envoy looks the zone's interface up on the proxy's host, which admission
// cannot see: a zone naming no interface there is Envoy's to refuse.
func parseIP(s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" && !ip.IsLinkLocalUnicast() {
		return netip.Addr{}, false
	}
	return ip, true
}

// checkIPAddress: where Envoy needs an IP address (a listener's address, a
// STATIC or EDS cluster's endpoints), it refuses a host name ("malformed IP
// address: x"), and an address that is not set ("Address must be set").
func checkIPAddress(f *findings, path string, a *corev3.Address) {
	switch a.GetAddress().(type) {
	case nil:
		f.add(path, "an address is required")
	case *corev3.Address_SocketAddress:
		sa := a.GetSocketAddress()
		sp := child(path, "socket_address")
		if sa.GetResolverName() != "" {
			return // a custom resolver is Envoy's to judge
		}
		if _, ok := parseIP(sa.GetAddress()); !ok {
			f.add(child(sp, "address"), "%q is not an IP address; only a STRICT_DNS or LOGICAL_DNS cluster resolves host names", sa.GetAddress())
		}
		if _, named := sa.GetPortSpecifier().(*corev3.SocketAddress_NamedPort); named {
			f.add(child(sp, "named_port"), "Envoy resolves no named port: give port_value")
		}
	}
}

// ListenerAddress is one address a listener listens on, for finding two
// listeners of a fleet whose addresses Envoy cannot both listen on.
//
// Envoy refuses a listener whose address another listener has ("error
// adding listener: 'x' has duplicate address 'y' as existing listener").
// Two listeners whose addresses differ but overlap on one port (a wildcard
// and an address it covers: 0.0.0.0 and 10.0.0.1, :: and ::1, and an IPv4
// address and the same address IPv4-mapped with ipv4_compat) Envoy loads,
// and binds both with SO_REUSEPORT; but when either sets
// enable_reuse_port false, the second fails to listen ("final pre-worker
// listener init for listener 'x' failed: cannot listen() errno=98") and
// Envoy drops it, having accepted it. An IPv6 wildcard without ipv4_compat
// is IPv6-only, and overlaps no IPv4 address.
type ListenerAddress struct {
	// Key is the same for two addresses Envoy takes for one: the socket
	// type and the address.
	Key string
	// Path names the address's field in the listener.
	Path string
	// Addr is the address as Envoy writes it.
	Addr string

	protocol  corev3.SocketAddress_Protocol
	addr      netip.AddrPort
	compat    bool // ipv4_compat: an IPv6 socket that takes IPv4 too
	reusePort bool
}

// Conflict says why Envoy cannot have listeners on both a and b, or returns
// "" when it can.
func (a ListenerAddress) Conflict(b ListenerAddress) string {
	switch {
	case a.Key == b.Key:
		return "Envoy refuses two listeners on one address"
	case a.protocol != b.protocol || a.addr.Port() != b.addr.Port() || a.reusePort && b.reusePort || !a.overlaps(b):
		return ""
	}
	return "the two overlap, and with enable_reuse_port false on either, Envoy drops the second to listen (cannot listen() errno=98)"
}

// overlaps says whether a socket bound to a's address and one bound to b's
// take some address in common, whatever their ports.
func (a ListenerAddress) overlaps(b ListenerAddress) bool {
	a4, aAll4 := a.v4()
	b4, bAll4 := b.v4()
	a6, aAll6 := a.v6()
	b6, bAll6 := b.v6()
	return (a4.IsValid() || aAll4) && (b4.IsValid() || bAll4) && (aAll4 || bAll4 || a4 == b4) ||
		(a6.IsValid() || aAll6) && (b6.IsValid() || bAll6) && (aAll6 || bAll6 || a6 == b6)
}

// v4 returns the IPv4 address a socket bound to a takes, or whether it
// takes them all.
func (a ListenerAddress) v4() (netip.Addr, bool) {
	ip := a.addr.Addr()
	switch {
	case ip.Is4():
		return ip, ip.IsUnspecified()
	case ip.Is4In6() && a.compat:
		return ip.Unmap(), false
	case ip == netip.IPv6Unspecified() && a.compat:
		return netip.Addr{}, true
	}
	return netip.Addr{}, false
}

// v6 returns the IPv6 address a socket bound to a takes, or whether it
// takes them all.
func (a ListenerAddress) v6() (netip.Addr, bool) {
	ip := a.addr.Addr()
	if !ip.Is6() || ip.Is4In6() {
		return netip.Addr{}, false
	}
	return ip, ip.IsUnspecified()
}

// ListenerAddresses returns the addresses of l that no other listener of the
// fleet may have: all of them, but those on port 0 that bind (each binds an
// ephemeral port of its own).
func ListenerAddresses(l *listenerv3.Listener) []ListenerAddress {
	if l.GetInternalListener() != nil || l.GetApiListener() != nil {
		return nil
	}
	binds := l.GetBindToPort() == nil || l.GetBindToPort().GetValue()
	reusePort := l.GetEnableReusePort() == nil || l.GetEnableReusePort().GetValue()
	var out []ListenerAddress
	add := func(path string, a *corev3.Address) {
		sa := a.GetSocketAddress()
		ap, ok := socketAddrPort(sa)
		if !ok || (ap.Port() == 0 && binds) {
			return
		}
		out = append(out, ListenerAddress{
			Key:  sa.GetProtocol().String() + " " + ap.String(),
			Path: path, Addr: ap.String(),
			protocol: sa.GetProtocol(), addr: ap, compat: sa.GetIpv4Compat(),
			// A listener that binds no socket takes no address from another.
			reusePort: reusePort || !binds,
		})
	}
	add("address", l.GetAddress())
	for i, a := range l.GetAdditionalAddresses() {
		add(index("", "additional_addresses", i)+".address", a.GetAddress())
	}
	return out
}

func checkListener(f *findings, l *listenerv3.Listener) {
	if staticListeners[l.GetName()] {
		f.add("name", "%q is the name of the bootstrap's own listener, which Envoy does not let LDS replace", l.GetName())
	}
	switch {
	case l.GetApiListener() != nil:
		// A listener for proxyless gRPC clients: they read only its HTTP
		// connection manager.
		if hcm := unpackHCM(l.GetApiListener().GetApiListener()); hcm != nil {
			checkHCM(f, "api_listener.api_listener(HttpConnectionManager)", hcm)
		}
		return
	case l.GetInternalListener() != nil:
		f.add("internal_listener", "the fleet's bootstrap has no InternalListener extension, which Envoy requires for internal listeners")
		return
	case l.GetAddress() == nil:
		f.add("address", "a listener needs an address")
		return
	}
	checkListenerAddress(f, l, "address", l.GetAddress(), l.GetAddress().GetSocketAddress().GetProtocol())
	for i, a := range l.GetAdditionalAddresses() {
		checkListenerAddress(f, l, index("", "additional_addresses", i)+".address", a.GetAddress(), l.GetAddress().GetSocketAddress().GetProtocol())
	}
	udp := l.GetAddress().GetSocketAddress().GetProtocol() == corev3.SocketAddress_UDP
	hasChains := len(l.GetFilterChains()) > 0 || l.GetDefaultFilterChain() != nil
	switch {
	case udp && l.GetUdpListenerConfig().GetQuicOptions() == nil && hasChains:
		f.add("filter_chains", "a UDP listener without quic_options takes no filter chains")
	case !udp && !hasChains:
		f.add("filter_chains", "a listener needs a filter chain (filter_chains or default_filter_chain)")
	}
	for i, fl := range l.GetListenerFilters() {
		if cd := fl.GetConfigDiscovery(); cd != nil {
			checkDiscovery(f, index("", "listener_filters", i)+".config_discovery", cd, listenerFilter)
		} else {
			placed(f, index("", "listener_filters", i)+".typed_config", fl.GetTypedConfig(), listenerFilter, false)
		}
	}
	checkFilterChains(f, l)
	checkMatcher(f, "filter_chain_matcher", l.GetFilterChainMatcher(), filterChainMatch)
	for i, fc := range l.GetFilterChains() {
		checkFilterChain(f, index("", "filter_chains", i), fc)
	}
	if fc := l.GetDefaultFilterChain(); fc != nil {
		checkFilterChain(f, "default_filter_chain", fc)
	}
	checkAccessLogs(f, "", l.GetAccessLog())
}

// checkListenerAddress: a listener's address is an IP address, of the same
// socket type as its first, that the bootstrap does not already use.
func checkListenerAddress(f *findings, l *listenerv3.Listener, path string, a *corev3.Address, protocol corev3.SocketAddress_Protocol) {
	switch a.GetAddress().(type) {
	case *corev3.Address_EnvoyInternalAddress:
		f.add(path, "an internal address needs internal_listener, which the fleet's bootstrap does not support")
		return
	case *corev3.Address_Pipe:
		return
	}
	checkIPAddress(f, path, a)
	sa := a.GetSocketAddress()
	sp := child(path, "socket_address")
	if sa.GetProtocol() != protocol {
		f.add(child(sp, "protocol"), "every address of a listener must have the same socket type (%s)", protocol)
	}
	ip, ok := parseIP(sa.GetAddress())
	if !ok {
		return
	}
	if sa.GetIpv4Compat() && !(ip.Is6() && (ip.IsUnspecified() || ip.Is4In6())) {
		f.add(child(sp, "ipv4_compat"), "only the IPv6 address :: or an IPv4-mapped IPv6 address can set ipv4_compat")
	}
	binds := l.GetBindToPort() == nil || l.GetBindToPort().GetValue()
	if !binds {
		return
	}
	// Envoy's listening sockets are IPv6-only unless ipv4_compat: one
	// cannot bind an IPv4-mapped address ("cannot bind
	// '[::ffff:10.0.0.1]:80': Invalid argument").
	if ip.Is4In6() && !sa.GetIpv4Compat() {
		f.add(child(sp, "ipv4_compat"), "an IPv4-mapped IPv6 address binds only with ipv4_compat true")
	}
	if sa.GetProtocol() != corev3.SocketAddress_TCP {
		return
	}
	for _, la := range ListenerAddresses(&listenerv3.Listener{Address: a, EnableReusePort: l.GetEnableReusePort()}) {
		for _, name := range slices.Sorted(maps.Keys(staticAddresses)) {
			for _, s := range staticAddresses[name] {
				if why := la.Conflict(s); why != "" {
					f.add(sp, "%s and %s, the address of the bootstrap's listener %q: %s", la.Addr, s.Addr, name, why)
				}
			}
		}
		// The admin interface listens without SO_REUSEPORT: no listener
		// can listen on an address that overlaps it.
		if la.Conflict(adminAddress) != "" {
			f.add(sp, "%s overlaps %s, where the bootstrap's admin interface listens", la.Addr, adminAddress.Addr)
		}
	}
}

func checkFilterChain(f *findings, path string, fc *listenerv3.FilterChain) {
	var chain []chainFilter
	for i, fl := range fc.GetFilters() {
		fp := index(path, "filters", i)
		if cd := fl.GetConfigDiscovery(); cd != nil {
			checkDiscovery(f, child(fp, "config_discovery"), cd, networkFilter)
			continue
		}
		ext, ok := placed(f, child(fp, "typed_config"), fl.GetTypedConfig(), networkFilter, false)
		if !ok {
			continue
		}
		chain = append(chain, chainFilter{fp, fl.GetName(), ext})
		if hcm := unpackHCM(fl.GetTypedConfig()); hcm != nil {
			checkHCM(f, child(fp, "typed_config(HttpConnectionManager)"), hcm)
		}
		tp := &tcpproxyv3.TcpProxy{}
		if fl.GetTypedConfig().MessageIs(tp) && fl.GetTypedConfig().UnmarshalTo(tp) == nil {
			checkAccessLogs(f, child(fp, "typed_config(TcpProxy)"), tp.GetAccessLog())
		}
	}
	if len(chain) == len(fc.GetFilters()) {
		checkTerminal(f, "network", chain)
	}
	if ts := fc.GetTransportSocket(); ts != nil {
		tp := child(path, "transport_socket.typed_config")
		if _, ok := placed(f, tp, ts.GetTypedConfig(), downstreamTLS, false); ok {
			tls := &tlsv3.DownstreamTlsContext{}
			if ts.GetTypedConfig().UnmarshalTo(tls) == nil {
				checkServerCertificates(f, tp+"(DownstreamTlsContext).common_tls_context", tls.GetCommonTlsContext())
			}
		}
	}
}

// checkServerCertificates: a server's TLS context has a certificate, from
// SDS or inline, and every inline one has its chain.
func checkServerCertificates(f *findings, path string, c *tlsv3.CommonTlsContext) {
	if len(c.GetTlsCertificates()) == 0 && len(c.GetTlsCertificateSdsSecretConfigs()) == 0 {
		f.add(path, "a server's TLS context needs a certificate: tls_certificate_sds_secret_configs or tls_certificates")
	}
	for i, cert := range c.GetTlsCertificates() {
		if cert.GetCertificateChain() == nil {
			f.add(index(path, "tls_certificates", i)+".certificate_chain", "a server's certificate needs its certificate_chain")
		}
	}
}

// checkStaticSecrets: an SDS secret without sds_config is one of the
// bootstrap's static secrets, and the fleet's bootstrap has none.
func checkStaticSecrets(f *findings, m proto.Message) {
	Walk(m, "", func(m proto.Message, path string) bool {
		s, ok := m.(*tlsv3.SdsSecretConfig)
		if !ok {
			return true
		}
		if s.GetSdsConfig() == nil {
			f.add(child(path, "sds_config"), "without sds_config, secret %q is one of the bootstrap's static secrets, and the fleet's bootstrap has none: give sds_config {ads: {}}", s.GetName())
		}
		return false
	})
}

func unpackHCM(a *anypb.Any) *hcmv3.HttpConnectionManager {
	hcm := &hcmv3.HttpConnectionManager{}
	if a == nil || !a.MessageIs(hcm) || a.UnmarshalTo(hcm) != nil {
		return nil
	}
	return hcm
}

func checkAccessLogs(f *findings, path string, logs []*accesslogv3.AccessLog) {
	for i, al := range logs {
		placed(f, index(path, "access_log", i)+".typed_config", al.GetTypedConfig(), accessLogger, false)
	}
}

func checkHCM(f *findings, path string, hcm *hcmv3.HttpConnectionManager) {
	checkHTTPFilters(f, path, "http_filters", "HTTP", hcm.GetHttpFilters())
	if p := hcm.GetTracing().GetProvider(); p != nil {
		tp := child(path, "tracing.provider.typed_config")
		z := &tracev3.ZipkinConfig{}
		if _, ok := placed(f, tp, p.GetTypedConfig(), tracer, false); ok && p.GetTypedConfig().MessageIs(z) && p.GetTypedConfig().UnmarshalTo(z) == nil &&
			z.GetCollectorService() == nil && (z.GetCollectorCluster() == "" || z.GetCollectorEndpoint() == "") {
			f.add(tp+"(ZipkinConfig)", "give collector_cluster and collector_endpoint, or collector_service")
		}
	}
	upgrades := upgradeTypes{}
	for i, u := range hcm.GetUpgradeConfigs() {
		up := index(path, "upgrade_configs", i)
		upgrades.add(f, up, i, u.GetUpgradeType())
		if len(u.GetFilters()) > 0 {
			checkHTTPFilters(f, up, "filters", "HTTP upgrade", u.GetFilters())
		}
	}
	if rds := hcm.GetRds(); rds != nil && rds.GetConfigSource() == nil && !strings.HasPrefix(rds.GetRouteConfigName(), "xdstp:") {
		f.add(child(path, "rds.config_source"), "RDS needs a config_source (ads: {})")
	}
	if rc := hcm.GetRouteConfig(); rc != nil {
		checkRouteConfig(f, child(path, "route_config"), rc)
	}
	checkAccessLogs(f, path, hcm.GetAccessLog())
}

// noUpstreamCodec is why a list of upstream HTTP filters cannot be served:
// its last filter must be the upstream codec, which is not linked.
const noUpstreamCodec = "upstream HTTP filters must end with envoy.filters.http.upstream_codec (UpstreamCodec), an extension this operator does not serve"

// checkHTTPFilterConfig applies the rules of the HTTP filters whose
// configuration holds more to check: the router's upstream filters, the
// RBAC filter's matchers and the compressor's library.
func checkHTTPFilterConfig(f *findings, path string, a *anypb.Any) {
	switch typ := a.MessageName(); typ {
	case "envoy.extensions.filters.http.router.v3.Router":
		r := &routerv3.Router{}
		if a.UnmarshalTo(r) == nil && len(r.GetUpstreamHttpFilters()) > 0 {
			f.add(path+"(Router).upstream_http_filters", "%s", noUpstreamCodec)
		}
	case "envoy.extensions.filters.http.rbac.v3.RBAC":
		r := &rbacv3.RBAC{}
		if a.UnmarshalTo(r) == nil {
			checkMatcher(f, path+"(RBAC).matcher", r.GetMatcher(), rbacMatch)
			checkMatcher(f, path+"(RBAC).shadow_matcher", r.GetShadowMatcher(), rbacMatch)
		}
	case "envoy.extensions.filters.http.compressor.v3.Compressor":
		c := &compressorv3.Compressor{}
		if a.UnmarshalTo(c) == nil && c.GetCompressorLibrary() != nil {
			placed(f, path+"(Compressor).compressor_library.typed_config", c.GetCompressorLibrary().GetTypedConfig(), compressionLib, false)
		}
	}
}

// checkDiscovery: a filter whose configuration comes by extension config
// discovery names the types it takes, each a filter of its kind, and its
// default configuration is one of them.
func checkDiscovery(f *findings, path string, cd *corev3.ExtensionConfigSource, kind string) {
	takes := map[string]bool{}
	for i, u := range cd.GetTypeUrls() {
		typ := u[strings.LastIndex(u, "/")+1:]
		takes[typ] = true
		if ext, ok := extensions[protoreflect.FullName(typ)]; !ok || ext.kind != kind {
			f.add(index(path, "type_urls", i), "%s is not %s this operator serves", typ, article(kind))
		}
	}
	if d := cd.GetDefaultConfig(); d != nil {
		if _, ok := placed(f, child(path, "default_config"), d, kind, false); ok && !takes[string(d.MessageName())] {
			f.add(child(path, "default_config"), "%s is not one of type_urls", d.MessageName())
		}
	}
}

// upgradeTypes are the upgrade types of a list of upgrade configs, by index:
// Envoy takes each once, whatever its case.
type upgradeTypes map[string]int

// add adds the upgrade type of the config at path, the i-th, and returns it
// in lower case.
func (u upgradeTypes) add(f *findings, path string, i int, typ string) string {
	t := strings.ToLower(typ)
	if first, dup := u[t]; dup {
		f.add(child(path, "upgrade_type"), "upgrade type %q is also that of upgrade_configs[%d]", typ, first)
	}
	u[t] = i
	return t
}

// checkHTTPFilters: each is an HTTP filter, and the router, the only
// terminal one, comes last.
func checkHTTPFilters(f *findings, path, field, chainType string, filters []*hcmv3.HttpFilter) {
	var chain []chainFilter
	complete := true
	for i, fl := range filters {
		fp := index(path, field, i)
		if cd := fl.GetConfigDiscovery(); cd != nil {
			checkDiscovery(f, child(fp, "config_discovery"), cd, httpFilter)
			complete = false
			continue
		}
		ext, ok := placed(f, child(fp, "typed_config"), fl.GetTypedConfig(), httpFilter, fl.GetIsOptional())
		if !ok {
			complete = false
			continue
		}
		chain = append(chain, chainFilter{fp, fl.GetName(), ext})
		checkHTTPFilterConfig(f, child(fp, "typed_config"), fl.GetTypedConfig())
	}
	if complete && len(chain) > 0 {
		checkTerminal(f, chainType, chain)
	}
}

// defaultMaxDirectResponseBodySize is Envoy's max_direct_response_body_size_bytes.
const defaultMaxDirectResponseBodySize = 4096

// checkRouteConfig applies the rules of Envoy's route table to a route
// configuration, served over RDS or inline in a connection manager.
func checkRouteConfig(f *findings, path string, rc *routev3.RouteConfiguration) {
	exact, prefixes, suffixes := map[string]string{}, map[string]string{}, map[string]string{}
	wildcard := ""
	maxBody := uint32(defaultMaxDirectResponseBodySize)
	if rc.GetMaxDirectResponseBodySizeBytes() != nil {
		maxBody = rc.GetMaxDirectResponseBodySizeBytes().GetValue()
	}
	checkMirrors(f, path, rc.GetRequestMirrorPolicies())
	for i, vh := range rc.GetVirtualHosts() {
		vp := index(path, "virtual_hosts", i)
		for j, d := range vh.GetDomains() {
			dp := index(vp, "domains", j)
			domain := strings.ToLower(d)
			var set map[string]string
			switch {
			case domain == "*":
				if wildcard != "" {
					f.add(dp, "the wildcard domain \"*\" is also that of %s: a route configuration may have it once", wildcard)
				}
				wildcard = dp
				continue
			case strings.HasPrefix(domain, "*"):
				set = suffixes
			case strings.HasSuffix(domain, "*"):
				set = prefixes
			default:
				set = exact
			}
			if first, dup := set[domain]; dup {
				f.add(dp, "domain %q is also %s: domains must be unique within a route configuration", d, first)
			}
			set[domain] = dp
		}
		if vh.GetMatcher() != nil && len(vh.GetRoutes()) > 0 {
			f.add(vp, "a virtual host cannot have both matcher and routes")
		}
		checkMatcher(f, child(vp, "matcher"), vh.GetMatcher(), routeMatch)
		for j, vc := range vh.GetVirtualClusters() {
			if len(vc.GetHeaders()) == 0 {
				f.add(index(vp, "virtual_clusters", j), "a virtual cluster needs headers")
			}
		}
		checkMirrors(f, vp, vh.GetRequestMirrorPolicies())
		checkRetryPolicy(f, child(vp, "retry_policy"), vh.GetRetryPolicy())
		for j, r := range vh.GetRoutes() {
			checkRoute(f, index(vp, "routes", j), r, maxBody)
		}
	}
}

func checkRoute(f *findings, path string, r *routev3.Route, maxBody uint32) {
	if body := r.GetDirectResponse().GetBody(); body != nil {
		n := len(body.GetInlineBytes()) + len(body.GetInlineString())
		if uint32(n) > maxBody || n > 0 && maxBody == 0 {
			f.add(child(path, "direct_response.body"), "the body is %d bytes; the route configuration's max_direct_response_body_size_bytes is %d", n, maxBody)
		}
	}
	a := r.GetRoute()
	if a == nil {
		return
	}
	ap := child(path, "route")
	for i, wc := range a.GetWeightedClusters().GetClusters() {
		if wc.GetWeight() == nil {
			f.add(index(ap, "weighted_clusters.clusters", i)+".weight", "every weighted cluster needs a weight")
		}
	}
	rewrites := 0
	for _, set := range []bool{a.GetPrefixRewrite() != "", a.GetRegexRewrite() != nil, a.GetPathRewritePolicy() != nil} {
		if set {
			rewrites++
		}
	}
	if rewrites > 1 {
		f.add(ap, "give only one of prefix_rewrite, regex_rewrite and path_rewrite_policy")
	}
	upgrades := upgradeTypes{}
	for i, u := range a.GetUpgradeConfigs() {
		up := index(ap, "upgrade_configs", i)
		if t := upgrades.add(f, up, i, u.GetUpgradeType()); u.GetConnectConfig() != nil && t != "connect" && t != "connect-udp" {
			f.add(child(up, "connect_config"), "only a CONNECT upgrade takes connect_config")
		}
	}
	checkMirrors(f, ap, a.GetRequestMirrorPolicies())
	checkRetryPolicy(f, child(ap, "retry_policy"), a.GetRetryPolicy())
}

// checkMirrors: a mirror policy names a cluster, or a header that names one.
func checkMirrors(f *findings, path string, mirrors []*routev3.RouteAction_RequestMirrorPolicy) {
	for i, m := range mirrors {
		if (m.GetCluster() == "") == (m.GetClusterHeader() == "") {
			f.add(index(path, "request_mirror_policies", i), "give exactly one of cluster and cluster_header")
		}
	}
}

// checkRetryPolicy: the back-off's max_interval is not below its base_interval.
func checkRetryPolicy(f *findings, path string, p *routev3.RetryPolicy) {
	b := p.GetRetryBackOff()
	if b == nil || b.GetMaxInterval() == nil {
		return
	}
	// Envoy counts milliseconds, and rounds an interval below one up to one.
	ms := func(d *durationpb.Duration) int64 { return max(d.AsDuration().Milliseconds(), 1) }
	if ms(b.GetMaxInterval()) < ms(b.GetBaseInterval()) {
		f.add(child(path, "retry_back_off.max_interval"), "must be at least base_interval")
	}
}

// checkHealthCheckNames: of a cluster's several health checks, each has a
// name of its own.
func checkHealthCheckNames(f *findings, c *clusterv3.Cluster) {
	if len(c.GetHealthChecks()) < 2 {
		return
	}
	names := map[string]int{}
	for i, hc := range c.GetHealthChecks() {
		hp := index("", "health_checks", i) + ".name"
		if first, dup := names[hc.GetName()]; dup && hc.GetName() != "" {
			f.add(hp, "%q is also the name of health_checks[%d]: the health checks of a cluster need names of their own", hc.GetName(), first)
		}
		if hc.GetName() == "" {
			f.add(hp, "a cluster with several health checks needs a name for each")
		}
		names[hc.GetName()] = i
	}
}

// lbCapable are the cluster types that bring their own load balancer.
func providesLB(c *clusterv3.Cluster) bool {
	return c.GetType() == clusterv3.Cluster_ORIGINAL_DST && c.GetClusterType() == nil
}

func checkCluster(f *findings, c *clusterv3.Cluster) {
	if staticClusters[c.GetName()] {
		f.add("name", "%q is the name of a static cluster of the bootstrap, which Envoy does not let CDS replace", c.GetName())
	}
	typ := c.GetType()
	if ct := c.GetClusterType(); ct != nil {
		f.add("cluster_type", "the custom cluster type %q is not one Envoy has", ct.GetName())
		return
	}
	switch {
	case typ == clusterv3.Cluster_EDS && c.GetEdsClusterConfig() == nil:
		f.add("eds_cluster_config", "an EDS cluster needs eds_cluster_config")
	case typ == clusterv3.Cluster_EDS && c.GetEdsClusterConfig().GetEdsConfig() == nil:
		f.add("eds_cluster_config.eds_config", "an EDS cluster needs the config source of its endpoints (ads: {})")
	case typ != clusterv3.Cluster_EDS && c.GetEdsClusterConfig() != nil:
		f.add("eds_cluster_config", "only an EDS cluster takes eds_cluster_config, not a %s one", typ)
	}
	checkLBPolicy(f, c)

	la := c.GetLoadAssignment()
	switch typ {
	case clusterv3.Cluster_STATIC:
		checkEndpointAddresses(f, "load_assignment", la, true)
	case clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		checkEndpointAddresses(f, "load_assignment", la, false)
		if typ == clusterv3.Cluster_LOGICAL_DNS && (len(la.GetEndpoints()) != 1 || len(la.GetEndpoints()[0].GetLbEndpoints()) != 1) {
			f.add("load_assignment", "a LOGICAL_DNS cluster needs exactly one endpoint, in one locality")
		}
		for i, le := range la.GetEndpoints() {
			for j, e := range le.GetLbEndpoints() {
				if e.GetEndpoint().GetAddress().GetSocketAddress().GetResolverName() != "" {
					f.add(fmt.Sprintf("load_assignment.endpoints[%d].lb_endpoints[%d].endpoint.address.socket_address.resolver_name", i, j),
						"a %s cluster resolves its endpoints itself: no custom resolver", typ)
				}
			}
		}
	}

	checkHealthCheckNames(f, c)
	if ts := c.GetTransportSocket(); ts != nil {
		placed(f, "transport_socket.typed_config", ts.GetTypedConfig(), upstreamTLS, false)
	}
	for i, m := range c.GetTransportSocketMatches() {
		placed(f, index("", "transport_socket_matches", i)+".transport_socket.typed_config", m.GetTransportSocket().GetTypedConfig(), upstreamTLS, false)
	}
	for i, fl := range c.GetFilters() {
		placed(f, index("", "filters", i)+".typed_config", fl.GetTypedConfig(), clusterFilter, false)
	}
	for name, a := range c.GetTypedExtensionProtocolOptions() {
		op := "typed_extension_protocol_options[" + name + "]"
		ext, ok := placed(f, op, a, protocolOptions, false)
		if ok && ext.name != name {
			f.add(op, "%s must be given under its own name, %s", a.MessageName(), ext.name)
		}
		po := &upstreamhttpv3.HttpProtocolOptions{}
		if !ok || a.UnmarshalTo(po) != nil {
			continue
		}
		if c.GetMaxRequestsPerConnection() != nil && po.GetCommonHttpProtocolOptions().GetMaxRequestsPerConnection() != nil {
			f.add("max_requests_per_connection", "give max_requests_per_connection in the cluster or in its HttpProtocolOptions, not in both")
		}
		if len(po.GetHttpFilters()) > 0 {
			f.add(op+"(HttpProtocolOptions).http_filters", "%s", noUpstreamCodec)
		}
		if po.GetAutoConfig() != nil && c.GetTransportSocket() == nil {
			f.add(op+"(HttpProtocolOptions).auto_config", "choosing the HTTP version by ALPN needs a TLS transport_socket")
		}
	}
}

// checkLBPolicy applies the rules of a cluster's load balancing policy.
func checkLBPolicy(f *findings, c *clusterv3.Cluster) {
	policy := c.GetLbPolicy()
	subset := len(c.GetLbSubsetConfig().GetSubsetSelectors()) > 0
	if c.GetLoadBalancingPolicy() != nil || policy == clusterv3.Cluster_LOAD_BALANCING_POLICY_CONFIG {
		switch {
		case c.GetLoadBalancingPolicy() == nil:
			f.add("load_balancing_policy", "lb_policy LOAD_BALANCING_POLICY_CONFIG needs load_balancing_policy")
		case c.GetLbSubsetConfig() != nil:
			f.add("lb_subset_config", "load_balancing_policy cannot be combined with lb_subset_config")
		}
		if cl := c.GetCommonLbConfig(); cl.GetZoneAwareLbConfig() != nil || cl.GetLocalityWeightedLbConfig() != nil || cl.GetConsistentHashingLbConfig() != nil {
			f.add("common_lb_config", "load_balancing_policy cannot be combined with zone_aware_lb_config, locality_weighted_lb_config or consistent_hashing_lb_config")
		}
		return
	}
	switch {
	case c.GetType() == clusterv3.Cluster_ORIGINAL_DST && policy != clusterv3.Cluster_CLUSTER_PROVIDED:
		f.add("lb_policy", "an ORIGINAL_DST cluster balances its own load: lb_policy must be CLUSTER_PROVIDED, not %s", policy)
	case policy == clusterv3.Cluster_CLUSTER_PROVIDED && !providesLB(c):
		f.add("lb_policy", "a %s cluster provides no load balancer: CLUSTER_PROVIDED is only for ORIGINAL_DST", c.GetType())
	case policy == clusterv3.Cluster_CLUSTER_PROVIDED && subset:
		f.add("lb_subset_config", "lb_policy CLUSTER_PROVIDED cannot be combined with lb_subset_config")
	}
	if c.GetLbSubsetConfig().GetLocalityWeightAware() && c.GetCommonLbConfig().GetLocalityWeightedLbConfig() == nil {
		f.add("lb_subset_config.locality_weight_aware", "needs common_lb_config.locality_weighted_lb_config")
	}
	switch policy {
	case clusterv3.Cluster_MAGLEV:
		if ts := c.GetMaglevLbConfig().GetTableSize(); ts != nil && !prime(ts.GetValue()) {
			f.add("maglev_lb_config.table_size", "%d is not a prime number, which Envoy requires", ts.GetValue())
		}
	case clusterv3.Cluster_RING_HASH:
		rh := c.GetRingHashLbConfig()
		lo, hi := uint64(1024), uint64(8388608) // Envoy's defaults
		if rh.GetMinimumRingSize() != nil {
			lo = rh.GetMinimumRingSize().GetValue()
		}
		if rh.GetMaximumRingSize() != nil {
			hi = rh.GetMaximumRingSize().GetValue()
		}
		if lo > hi {
			f.add("ring_hash_lb_config", "minimum_ring_size (%d) is above maximum_ring_size (%d)", lo, hi)
		}
	}
}

func prime(n uint64) bool {
	if n < 2 {
		return false
	}
	for d := uint64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// checkEndpointAddresses: the endpoints of a STATIC cluster and of EDS are
// IP addresses (ip), those of a DNS cluster host names or IP addresses; a
// health check address is always an IP address.
func checkEndpointAddresses(f *findings, path string, la *endpointv3.ClusterLoadAssignment, ip bool) {
	for i, le := range la.GetEndpoints() {
		for j, e := range le.GetLbEndpoints() {
			ep := fmt.Sprintf("%s[%d].lb_endpoints[%d].endpoint", child(path, "endpoints"), i, j)
			if e.GetEndpoint() == nil {
				// Envoy resolves no endpoint_name: it needs the address.
				f.add(ep, "an lb_endpoint needs its endpoint and address")
				continue
			}
			if ip {
				checkIPAddress(f, child(ep, "address"), e.GetEndpoint().GetAddress())
			} else if e.GetEndpoint().GetAddress() == nil {
				f.add(child(ep, "address"), "an address is required")
			}
			if a := e.GetEndpoint().GetHealthCheckConfig().GetAddress(); a != nil {
				checkIPAddress(f, child(ep, "health_check_config.address"), a)
			}
		}
	}
}
