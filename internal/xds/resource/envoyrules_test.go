package resource

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// Snippets for the cases below.
const (
	hcmType     = `"@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`
	routerType  = `"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router`
	router      = `{name: envoy.filters.http.router, typed_config: {` + routerType + `}}`
	rds         = `rds: {route_config_name: r, config_source: {ads: {}}}`
	tcpProxy    = `{name: tcp, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: tcp, cluster: c}}`
	downTLSType = `type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext`
	upTLSType   = `type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext`
	edsConfig   = `eds_cluster_config: {eds_config: {ads: {}}}`
)

// hcmListener is a listener on port whose connection manager has the given
// HTTP filters and route configuration (rds or an inline route_config).
func hcmListener(port, filters, routes string) string {
	return `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: ` + port + `}},
filter_chains: [{filters: [{name: hcm, typed_config: {` + hcmType + `, stat_prefix: h, ` + routes + `,
http_filters: [` + filters + `]}}]}]}`
}

// inlineRoutes is an inline route configuration with the given virtual hosts.
func inlineRoutes(vhosts string) string {
	return `route_config: {name: r, virtual_hosts: [` + vhosts + `]}`
}

// staticCluster is a STATIC cluster whose one endpoint is at address.
func staticCluster(typ, address string) string {
	return `{name: c, type: ` + typ + `, load_assignment: {cluster_name: c, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: ` + address + `, port_value: 80}}}}]}]}}`
}

// vhMatcher is a route configuration whose one virtual host has matcher.
func vhMatcher(matcher string) string {
	return `{name: r, virtual_hosts: [{name: v, domains: ["*"], matcher: ` + matcher + `}]}`
}

// typed is a TypedExtensionConfig named name of type typ (a full name)
// with the fields extra.
func typed(name, typ, extra string) string {
	return `{name: ` + name + `, typed_config: {"@type": type.googleapis.com/` + typ + extra + `}}`
}

// rbacNested is an RBAC HTTP filter whose one permission is n not_rules deep.
func rbacNested(n int) string {
	perm := `{any: true}`
	for range n {
		perm = `{not_rule: ` + perm + `}`
	}
	return `{name: rbac, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC, rules: {policies: {p: {permissions: [` + perm + `], principals: [{any: true}]}}}}}`
}

// chains is a listener on port 80 with the given filter chains' matches
// and the fields extra.
func chains(extra string, matches ...string) string {
	var fcs []string
	for _, m := range matches {
		fcs = append(fcs, `{`+m+`filters: [`+tcpProxy+`]}`)
	}
	return `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, filter_chains: [` + strings.Join(fcs, ", ") + `]` + extra + `}`
}

const (
	headerInput = `{name: i, typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: x}}`
	routeAction = `{name: a, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.Route, match: {prefix: /}, direct_response: {status: 200}}}`
	chainNamedA = `, filter_chain_matcher: {on_no_match: {action: {name: x, typed_config: {"@type": type.googleapis.com/google.protobuf.StringValue, value: a}}}}`
	corsType    = `type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors`
)

// envoyRuleCase is one resource Envoy refuses when it loads it.
type envoyRuleCase struct {
	name, kind, yaml string
	// field is the field our message names (a part of its path).
	field string
	// envoy is what Envoy v1.40 says when it loads the resource: a real
	// Envoy says it (TestEnvoyRefusesWhatTheRulesRefuse), unless it starts
	// with "(no error", where Envoy ignores the resource over xDS and the
	// note says how.
	envoy string
}

var envoyRuleCases = []envoyRuleCase{
	// Durations: MessageUtil::validateDurationFields, on every duration.
	{"negative duration in a route", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: c, timeout: -1s}}]}]}`,
		"virtual_hosts[0].routes[0].route.timeout", "Invalid duration: Expected positive duration: seconds: -1"},
	{"negative nanos in a cluster", "clusters", `{name: c, type: EDS, ` + edsConfig + `, common_lb_config: {update_merge_window: -0.5s}}`,
		"common_lb_config.update_merge_window", "Invalid duration: Expected positive duration: nanos: -500000000"},
	{"negative duration inside a typed_config", "listeners", hcmListener("80", router, rds+`, stream_idle_timeout: -3s`),
		"typed_config(HttpConnectionManager).stream_idle_timeout", "Invalid duration: Expected positive duration: seconds: -3"},
	{"duration too long for nanoseconds", "clusters", `{name: c, type: EDS, ` + edsConfig + `, connect_timeout: 315576000000s}`,
		"connect_timeout", "Invalid duration: Duration out-of-range"},

	// Regular expressions: RE2, in Regex::Utility::parseRegex.
	{"regex RE2 cannot parse", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {safe_regex: {regex: "(+invalid)"}}, route: {cluster: c}}]}]}`,
		"match.safe_regex.regex", "no argument for repetition operator: +"},
	{"regex with a lookahead", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /, headers: [{name: x, string_match: {safe_regex: {regex: "a(?=b)"}}}]}, route: {cluster: c}}]}]}`,
		"string_match.safe_regex.regex", "invalid perl operator: (?="},
	{"regex over the program size", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {safe_regex: {regex: "^/api/v[0-9]+/users/[a-z0-9-]{1,64}$"}}, route: {cluster: c}}]}]}`,
		"match.safe_regex.regex", "regex '^/api/v[0-9]+/users/[a-z0-9-]{1,64}$' RE2 program size of 268 > max program size of 100 set for the error level threshold. Increase configured max program size if necessary."},
	{"regex over its own max_program_size", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {safe_regex: {regex: "/asdf/.*", google_re2: {max_program_size: 1}}}, route: {cluster: c}}]}]}`,
		"match.safe_regex.regex", "regex '/asdf/.*' RE2 program size of 12 > max program size of 1. Increase configured max program size if necessary."},

	// Listeners: ListenerManagerImpl and ListenerImpl.
	{"listener without an address", "listeners", `{name: l, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"address", "error adding listener named 'l': address is necessary"},
	{"listener on a host name", "listeners", `{name: l, address: {socket_address: {address: example.com, port_value: 80}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"address.socket_address.address", "malformed IP address: example.com"},
	{"listener additional address on a host name", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, additional_addresses: [{address: {socket_address: {address: localhost, port_value: 81}}}], filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"additional_addresses[0].address.socket_address.address", "malformed IP address: localhost"},
	{"listener address with a zone, not link-local", "listeners", `{name: l, address: {socket_address: {address: "::1%lo", port_value: 80}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"address.socket_address.address", "malformed IP address: ::1%lo"},
	{"listener address in inet_aton's short form", "listeners", `{name: l, address: {socket_address: {address: "127.1", port_value: 80}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"address.socket_address.address", "malformed IP address: 127.1"},
	{"ipv4_compat on an IPv4 address", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80, ipv4_compat: true}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"address.socket_address.ipv4_compat", "Only IPv6 address '::' or valid IPv4-mapped IPv6 address can set ipv4_compat: 0.0.0.0:80"},
	{"additional address of another socket type", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, additional_addresses: [{address: {socket_address: {address: 0.0.0.0, port_value: 81, protocol: UDP}}}], filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"additional_addresses[0].address.socket_address.protocol", "listener l: has different socket type. The listener only support same socket type for all the addresses."},
	{"listener without filter chains", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}}`,
		"filter_chains", "error adding listener '0.0.0.0:80': no filter chains specified"},
	{"UDP listener with filter chains", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 53, protocol: UDP}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"filter_chains", "error adding listener '0.0.0.0:53': 1 filter chain(s) specified for connection-less UDP listener."},
	{"internal listener", "listeners", `{name: l, internal_listener: {}, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"internal_listener", "error adding listener named 'l': InternalListener bootstrap extension is mandatory"},
	{"internal address without internal_listener", "listeners", `{name: l, address: {envoy_internal_address: {server_listener_name: x}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"address", "error adding listener named 'l': use internal_listener field instead of address for internal listeners"},
	{"listener on the ready listener's address", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 19001}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"address.socket_address", "error adding listener: 'l' has duplicate address '0.0.0.0:19001' as existing listener, to check if the listener has duplicated addresses with other listeners or 'enable_reuse_port' is set to 'false' for the listener"},
	{"listener named as the bootstrap's", "listeners", `{name: envoy_ready_stats, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"name", "(no error: LDS cannot replace a static listener; the update is ignored, \"duplicate/locked listener 'envoy_ready_stats'. no add/update\")"},

	// Filters in the wrong place or order: Config::Utility::getAndCheckFactory
	// and validateTerminalFilters.
	{"terminal network filter not last", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, filter_chains: [{filters: [` + tcpProxy + `, ` + tcpProxy + `]}]}`,
		"filter_chains[0].filters[0]", "Error: terminal filter named tcp of type envoy.filters.network.tcp_proxy must be the last filter in a network filter chain."},
	{"HTTP filter as a network filter", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, filter_chains: [{filters: [` + router + `]}]}`,
		"filter_chains[0].filters[0].typed_config", "Didn't find a registered implementation for 'envoy.filters.http.router' with type URL: 'envoy.extensions.filters.http.router.v3.Router'"},
	{"network filter without typed_config", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy}]}]}`,
		"filter_chains[0].filters[0].typed_config", "Didn't find a registered implementation for 'envoy.filters.network.tcp_proxy' with type URL: ''"},
	{"connection manager as a listener filter", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, listener_filters: [{name: hcm, typed_config: {` + hcmType + `, stat_prefix: h, ` + rds + `}}], filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"listener_filters[0].typed_config", "Didn't find a registered implementation for 'hcm' with type URL: 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager'"},
	{"connection manager as an HTTP filter", "listeners", hcmListener("80", `{name: hcm, typed_config: {`+hcmType+`, stat_prefix: x, `+rds+`}}, `+router, rds),
		"http_filters[0].typed_config", "Didn't find a registered implementation for 'hcm' with type URL: 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager'"},
	{"router not the last HTTP filter", "listeners", hcmListener("80", router+`, {name: cors, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}`, rds),
		"http_filters[0]", "Error: terminal filter named envoy.filters.http.router of type envoy.filters.http.router must be the last filter in a http filter chain."},
	{"HTTP filters without the router", "listeners", hcmListener("80", `{name: cors, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}`, rds),
		"http_filters[0]", "Error: non-terminal filter named cors of type envoy.filters.http.cors is the last filter in a http filter chain."},
	{"upgrade filters not ending in the router", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, filter_chains: [{filters: [{name: hcm, typed_config: {` + hcmType + `, stat_prefix: h, ` + rds + `, http_filters: [` + router + `], upgrade_configs: [{upgrade_type: websocket, filters: [` + router + `, {name: cors, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}]}]}}]}]}`,
		"upgrade_configs[0].filters[0]", "Error: terminal filter named envoy.filters.http.router of type envoy.filters.http.router must be the last filter in a http upgrade filter chain."},
	{"duplicate upgrade configs", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, filter_chains: [{filters: [{name: hcm, typed_config: {` + hcmType + `, stat_prefix: h, ` + rds + `, http_filters: [` + router + `], upgrade_configs: [{upgrade_type: websocket}, {upgrade_type: WebSocket}]}}]}]}`,
		"upgrade_configs[1].upgrade_type", "Error: multiple upgrade configs with the same name: 'WebSocket'"},
	{"access logger of the wrong kind", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, access_log: [{name: log, typed_config: {` + routerType + `}}], filter_chains: [{filters: [` + tcpProxy + `]}]}`,
		"access_log[0].typed_config", "Didn't find a registered implementation for 'log' with type URL: 'envoy.extensions.filters.http.router.v3.Router'"},

	// TLS contexts of the wrong direction.
	{"upstream TLS context in a listener", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 443}}, filter_chains: [{transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": ` + upTLSType + `}}, filters: [` + tcpProxy + `]}]}`,
		"filter_chains[0].transport_socket.typed_config", "Didn't find a registered implementation for 'envoy.transport_sockets.tls' with type URL: 'envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext'"},
	{"downstream TLS context without a certificate", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 443}}, filter_chains: [{transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": ` + downTLSType + `}}, filters: [` + tcpProxy + `]}]}`,
		"filter_chains[0].transport_socket.typed_config(DownstreamTlsContext).common_tls_context", "No TLS certificates found for server context"},
	{"downstream TLS certificate without its chain", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 443}}, filter_chains: [{transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": ` + downTLSType + `, common_tls_context: {tls_certificates: [{}]}}}, filters: [` + tcpProxy + `]}]}`,
		"common_tls_context.tls_certificates[0].certificate_chain", "Server TlsCertificates must have a certificate specified"},
	{"SDS secret without sds_config", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 443}}, filter_chains: [{transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": ` + downTLSType + `, common_tls_context: {tls_certificate_sds_secret_configs: [{name: s}]}}}, filters: [` + tcpProxy + `]}]}`,
		"tls_certificate_sds_secret_configs[0].sds_config", "Unknown static secret: s"},
	{"SDS validation context without sds_config", "clusters", `{name: c, type: EDS, ` + edsConfig + `, transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": ` + upTLSType + `, common_tls_context: {validation_context_sds_secret_config: {name: ca}}}}}`,
		"validation_context_sds_secret_config.sds_config", "Unknown static certificate validation context: ca"},
	{"downstream TLS context in a cluster", "clusters", `{name: c, type: EDS, ` + edsConfig + `, transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": ` + downTLSType + `}}}`,
		"transport_socket.typed_config", "Didn't find a registered implementation for 'envoy.transport_sockets.tls' with type URL: 'envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext'"},

	// Route tables: RouteMatcher, VirtualHostImpl, RouteEntryImplBase.
	{"duplicate domain across virtual hosts", "routes", `{name: r, virtual_hosts: [{name: a, domains: [example.com]}, {name: b, domains: [Example.COM]}]}`,
		"virtual_hosts[1].domains[0]", "Only unique values for domains are permitted. Duplicate entry of domain example.com in route r"},
	{"duplicate suffix wildcard domain", "routes", `{name: r, virtual_hosts: [{name: a, domains: ["*.example.com", "*.example.com"]}]}`,
		"virtual_hosts[0].domains[1]", "Only unique values for domains are permitted. Duplicate entry of domain *.example.com in route r"},
	{"two wildcard domains", "routes", `{name: r, virtual_hosts: [{name: a, domains: ["*"]}, {name: b, domains: ["*"]}]}`,
		"virtual_hosts[1].domains[0]", "Only a single wildcard domain is permitted in route r"},
	{"duplicate domain in an inline route configuration", "listeners", hcmListener("80", router, inlineRoutes(`{name: a, domains: [x.com]}, {name: b, domains: [x.com]}`)),
		"route_config.virtual_hosts[1].domains[0]", "Only unique values for domains are permitted. Duplicate entry of domain x.com in route r"},
	{"direct response body over the limit", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, direct_response: {status: 200, body: {inline_string: "` + strings.Repeat("x", 4097) + `"}}}]}]}`,
		"routes[0].direct_response.body", "response body size is 4097 bytes; maximum is 4096"},
	{"direct response body over its configured limit", "routes", `{name: r, max_direct_response_body_size_bytes: 10, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, direct_response: {status: 200, body: {inline_string: "eleven byte"}}}]}]}`,
		"routes[0].direct_response.body", "response body size is 11 bytes; maximum is 10"},
	{"two path rewrites", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: c, prefix_rewrite: /x, regex_rewrite: {pattern: {regex: a}, substitution: b}}}]}]}`,
		"routes[0].route", "Specify only one of prefix_rewrite, regex_rewrite or path_rewrite_policy"},
	{"route with a duplicate upgrade", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: c, upgrade_configs: [{upgrade_type: websocket}, {upgrade_type: websocket}]}}]}]}`,
		"route.upgrade_configs[1].upgrade_type", "Duplicate upgrade websocket"},
	{"connect_config on a websocket upgrade", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: c, upgrade_configs: [{upgrade_type: websocket, connect_config: {}}]}}]}]}`,
		"route.upgrade_configs[0].connect_config", "Non-CONNECT upgrade type websocket has ConnectConfig"},
	{"retry back-off max below base", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: c, retry_policy: {retry_back_off: {base_interval: 2s, max_interval: 1s}}}}]}]}`,
		"route.retry_policy.retry_back_off.max_interval", "retry_policy.max_interval must greater than or equal to the base_interval"},
	{"mirror policy with cluster and header", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: c, request_mirror_policies: [{cluster: m, cluster_header: x-mirror}]}}]}]}`,
		"route.request_mirror_policies[0]", "Only one of cluster 'm' or cluster_header 'x-mirror' in request mirror policy can be specified"},
	{"virtual host with matcher and routes", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], matcher: {on_no_match: {action: {name: a, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.Route, match: {prefix: /}, route: {cluster: c}}}}}, routes: [{match: {prefix: /}, route: {cluster: c}}]}]}`,
		"virtual_hosts[0]", "cannot set both matcher and routes on virtual host"},
	{"virtual cluster without headers", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], virtual_clusters: [{name: vc}]}]}`,
		"virtual_hosts[0].virtual_clusters[0]", "virtual clusters must define 'headers'"},

	// Clusters: the cluster manager and its factories.
	{"STATIC cluster with eds_cluster_config", "clusters", `{name: c, type: STATIC, ` + edsConfig + `}`,
		"eds_cluster_config", "eds_cluster_config set in a non-EDS cluster"},
	{"STRICT_DNS cluster with eds_cluster_config", "clusters", `{name: c, type: STRICT_DNS, ` + edsConfig + `}`,
		"eds_cluster_config", "eds_cluster_config set in a non-EDS cluster"},
	{"EDS cluster without eds_cluster_config", "clusters", `{name: c, type: EDS}`,
		"eds_cluster_config", "cannot create an EDS cluster without an EDS config"},
	{"ORIGINAL_DST cluster with round robin", "clusters", `{name: c, type: ORIGINAL_DST, lb_policy: ROUND_ROBIN}`,
		"lb_policy", "cluster: LB policy ROUND_ROBIN is not valid for Cluster type ORIGINAL_DST. Only 'CLUSTER_PROVIDED' is allowed with cluster type 'ORIGINAL_DST'"},
	{"EDS cluster with CLUSTER_PROVIDED", "clusters", `{name: c, type: EDS, ` + edsConfig + `, lb_policy: CLUSTER_PROVIDED}`,
		"lb_policy", "cluster manager: cluster provided LB specified but cluster 'c' did not provide one. Check cluster documentation."},
	{"CLUSTER_PROVIDED with a subset config", "clusters", `{name: c, type: ORIGINAL_DST, lb_policy: CLUSTER_PROVIDED, lb_subset_config: {subset_selectors: [{keys: [x]}]}}`,
		"lb_subset_config", "cluster: LB policy CLUSTER_PROVIDED cannot be combined with lb_subset_config"},
	{"LOAD_BALANCING_POLICY_CONFIG without a policy", "clusters", `{name: c, type: EDS, ` + edsConfig + `, lb_policy: LOAD_BALANCING_POLICY_CONFIG}`,
		"load_balancing_policy", "cluster: field load_balancing_policy need to be set"},
	{"locality-weight-aware subsets without locality weights", "clusters", `{name: c, type: EDS, ` + edsConfig + `, lb_subset_config: {subset_selectors: [{keys: [x]}], locality_weight_aware: true}}`,
		"lb_subset_config.locality_weight_aware", "Locality weight aware subset LB requires that a locality_weighted_lb_config be set in c"},
	{"maglev table size not prime", "clusters", `{name: c, type: EDS, ` + edsConfig + `, lb_policy: MAGLEV, maglev_lb_config: {table_size: 65536}}`,
		"maglev_lb_config.table_size", "The table size of maglev must be prime number"},
	{"ring hash minimum above maximum", "clusters", `{name: c, type: EDS, ` + edsConfig + `, lb_policy: RING_HASH, ring_hash_lb_config: {maximum_ring_size: 512}}`,
		"ring_hash_lb_config", "ring hash: minimum_ring_size (1024) > maximum_ring_size (512)"},
	{"two health checks without names", "clusters", `{name: c, type: EDS, ` + edsConfig + `, health_checks: [{timeout: 1s, interval: 1s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {}}, {timeout: 1s, interval: 1s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {}}]}`,
		"health_checks[0].name", "health check at index 0 is missing a name; all health checks must have a name when multiple health checks are configured"},
	{"two health checks of one name", "clusters", `{name: c, type: EDS, ` + edsConfig + `, health_checks: [{name: a, timeout: 1s, interval: 1s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {}}, {name: a, timeout: 1s, interval: 1s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {}}]}`,
		"health_checks[1].name", "duplicate health check name 'a' at index 1; all health check names must be unique within a cluster"},
	{"max_requests_per_connection twice", "clusters", `{name: c, type: EDS, ` + edsConfig + `, max_requests_per_connection: 10, typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, common_http_protocol_options: {max_requests_per_connection: 5}, explicit_http_config: {http2_protocol_options: {}}}}}`,
		"max_requests_per_connection", "Only one of max_requests_per_connection from Cluster or HttpProtocolOptions can be specified"},
	{"ALPN without TLS", "clusters", `{name: c, type: EDS, ` + edsConfig + `, typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, auto_config: {}}}}`,
		"auto_config", "ALPN configured for cluster c which has a non-ALPN transport socket"},
	{"protocol options under another name", "clusters", `{name: c, type: EDS, ` + edsConfig + `, typed_extension_protocol_options: {http: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {}}}}}`,
		"typed_extension_protocol_options[http]", "Didn't find a registered network or http filter or protocol options implementation for name: 'http'"},
	{"STATIC cluster on a host name", "clusters", staticCluster("STATIC", "backend.default.svc"),
		"load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address", "malformed IP address: backend.default.svc"},
	{"LOGICAL_DNS cluster with two endpoints", "clusters", `{name: c, type: LOGICAL_DNS, load_assignment: {cluster_name: c, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: a.example, port_value: 80}}}}, {endpoint: {address: {socket_address: {address: b.example, port_value: 80}}}}]}]}}`,
		"load_assignment", "LOGICAL_DNS clusters must have a single locality_lb_endpoint and a single lb_endpoint"},
	{"cluster named as the bootstrap's", "clusters", `{name: envoy_admin, type: EDS, ` + edsConfig + `}`,
		"name", "(no error: CDS cannot replace a static cluster; the update is skipped, and routes to envoy_admin reach the admin interface)"},
	{"cluster named as the xDS cluster", "clusters", `{name: xds_cluster, type: EDS, ` + edsConfig + `}`,
		"name", "(no error: CDS cannot replace a static cluster; the update is skipped)"},

	// Endpoints over EDS: EdsClusterImpl, which resolves every address.
	{"EDS endpoint on a host name", "endpoints", `{cluster_name: c, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: backend.example, port_value: 80}}}}]}]}`,
		"endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address", "malformed IP address: backend.example"},
	{"EDS endpoint without an address", "endpoints", `{cluster_name: c, endpoints: [{lb_endpoints: [{endpoint: {}}]}]}`,
		"endpoints[0].lb_endpoints[0].endpoint.address", "Address must be set"},
	{"EDS health check address on a host name", "endpoints", `{cluster_name: c, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}, health_check_config: {address: {socket_address: {address: foo.bar.com, port_value: 4321}}}}}]}]}`,
		"health_check_config.address.socket_address.address", "malformed IP address: foo.bar.com"},

	// Extensions of another kind where Envoy expects a tracer, a cluster
	// filter, an upstream HTTP filter, a matcher's input, custom matcher or
	// action, or a filter of discovery's kind.
	{"connection manager as a tracer", "listeners", hcmListener("80", router, rds+`, tracing: {provider: {name: z, typed_config: {`+hcmType+`, stat_prefix: x}}}`),
		"tracing.provider.typed_config", "Didn't find a registered implementation for 'z' with type URL: 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager'"},
	{"HTTP filter as a cluster filter", "clusters", `{name: c, type: EDS, ` + edsConfig + `, filters: [` + typed("f", "envoy.extensions.filters.http.router.v3.Router", "") + `]}`,
		"filters[0].typed_config", "Didn't find a registered implementation for 'f' with type URL: 'envoy.extensions.filters.http.router.v3.Router'"},
	{"upstream HTTP filters of a cluster", "clusters", `{name: c, type: EDS, ` + edsConfig + `, typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http_protocol_options: {}}, http_filters: [` + typed("rbac", "envoy.extensions.filters.http.rbac.v3.RBAC", "") + `]}}}`,
		"(HttpProtocolOptions).http_filters", "The codec filter is the only valid terminal upstream HTTP filter, use 'envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec'"},
	{"upstream HTTP filters of the router", "listeners", hcmListener("80", `{name: envoy.filters.http.router, typed_config: {`+routerType+`, upstream_http_filters: [`+typed("rbac", "envoy.extensions.filters.http.rbac.v3.RBAC", "")+`]}}`, rds),
		"(Router).upstream_http_filters", "When upstream_http_filters are specified, they must explicitly end with an UpstreamCodec filter."},
	{"HTTP filter as a matcher's input", "routes", vhMatcher(`{matcher_tree: {input: ` + typed("i", "envoy.extensions.filters.http.router.v3.Router", "") + `, exact_match_map: {map: {yy: {action: ` + routeAction + `}}}}}`),
		"matcher.matcher_tree.input.typed_config", "Didn't find a registered implementation for 'i' with type URL: 'envoy.extensions.filters.http.router.v3.Router'"},
	{"route table matching on a response header", "routes", vhMatcher(`{matcher_list: {matchers: [{predicate: {single_predicate: {input: ` + typed("i", "envoy.type.matcher.v3.HttpResponseHeaderMatchInput", ", header_name: x") + `, value_match: {exact: yy}}}, on_match: {action: ` + routeAction + `}}]}}`),
		"single_predicate.input.typed_config", "Route table can only match on request headers, saw type.googleapis.com/envoy.type.matcher.v3.HttpResponseHeaderMatchInput"},
	{"HTTP filter as a matcher's action", "routes", vhMatcher(`{on_no_match: {matcher: {on_no_match: {action: ` + typed("a", "envoy.extensions.filters.http.router.v3.Router", "") + `}}}}`),
		"matcher.on_no_match.matcher.on_no_match.action.typed_config", "Didn't find a registered implementation for 'a' with type URL: 'envoy.extensions.filters.http.router.v3.Router'"},
	{"HTTP filter as a custom matcher", "routes", vhMatcher(`{matcher_tree: {input: ` + headerInput + `, custom_match: ` + typed("c", "envoy.extensions.filters.http.router.v3.Router", "") + `}}`),
		"matcher.matcher_tree.custom_match.typed_config", "Didn't find a registered implementation for 'c' with type URL: 'envoy.extensions.filters.http.router.v3.Router'"},
	{"filter chain matcher on an HTTP input", "listeners", chains(`, filter_chain_matcher: {matcher_tree: {input: `+headerInput+`, exact_match_map: {map: {yy: {action: `+typed("x", "google.protobuf.StringValue", ", value: a")+`}}}}}`, `name: a, `),
		"filter_chain_matcher.matcher_tree.input.typed_config", "cannot create a filter chain matcher: Didn't find a registered implementation for 'i' with type URL: 'envoy.type.matcher.v3.HttpRequestHeaderMatchInput'"},
	{"RBAC filter matching on a response header", "listeners", hcmListener("80", `{name: rbac, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC, matcher: {matcher_tree: {input: `+typed("i", "envoy.type.matcher.v3.HttpResponseHeaderMatchInput", ", header_name: x")+`, exact_match_map: {map: {yy: {action: `+typed("a", "envoy.config.rbac.v3.Action", ", name: x")+`}}}}}}}, `+router, rds),
		"(RBAC).matcher.matcher_tree.input.typed_config", "RBAC HTTP filter cannot match on 'type.googleapis.com/envoy.type.matcher.v3.HttpResponseHeaderMatchInput'"},
	{"discovered HTTP filter defaulting to a network filter", "listeners", hcmListener("80", `{name: cors, config_discovery: {config_source: {ads: {}}, default_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: c}, type_urls: [`+corsType+`]}}, `+router, rds),
		"config_discovery.default_config", "Error: cannot find filter factory cors for default filter configuration with type URL type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy."},
	{"discovered HTTP filter defaulting to a type it does not take", "listeners", hcmListener("80", `{name: cors, config_discovery: {config_source: {ads: {}}, default_config: {"@type": `+corsType+`}, type_urls: [type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault]}}, `+router, rds),
		"config_discovery.default_config", "Error: filter config has type URL envoy.extensions.filters.http.cors.v3.Cors but expect envoy.extensions.filters.http.fault.v3.HTTPFault."},
	{"discovered HTTP filter taking a network filter", "listeners", hcmListener("80", `{name: cors, config_discovery: {config_source: {ads: {}}, type_urls: [type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy]}}, `+router, rds),
		"config_discovery.type_urls[0]", "Error: no factory found for a required type URL envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy."},

	// Regular expressions of the generic matcher API: RE2, without a limit
	// on the program's size.
	{"generic matcher regex RE2 cannot parse", "routes", vhMatcher(`{matcher_list: {matchers: [{predicate: {single_predicate: {input: ` + headerInput + `, value_match: {safe_regex: {google_re2: {}, regex: "(+"}}}}, on_match: {action: ` + routeAction + `}}]}}`),
		"value_match.safe_regex.regex", "no argument for repetition operator: +"},
	{"generic matcher regex with a lookahead", "routes", vhMatcher(`{matcher_list: {matchers: [{predicate: {single_predicate: {input: ` + headerInput + `, value_match: {safe_regex: {google_re2: {}, regex: "a(?=b)"}}}}, on_match: {action: ` + routeAction + `}}]}}`),
		"value_match.safe_regex.regex", "invalid perl operator: (?="},

	// Nesting: protobuf's parser takes 100 levels below the top of each
	// resource and each typed_config.
	{"RBAC permission nested too deep", "listeners", hcmListener("80", rbacNested(97)+`, `+router, rds),
		"http_filters[0].typed_config(RBAC)", "Unable to unpack as envoy.extensions.filters.http.rbac.v3.RBAC"},

	// Filter chains: FilterChainManagerImpl.
	{"two filter chains without a match", "listeners", chains("", "", ""),
		"filter_chains[1].filter_chain_match", "filter chain '' has the same matching rules defined as ''. duplicate matcher is: {}"},
	{"two filter chains of one match", "listeners", chains("", "filter_chain_match: {server_names: [a.com]}, ", "filter_chain_match: {server_names: [a.com]}, "),
		"filter_chains[1].filter_chain_match", `filter chain '' has the same matching rules defined as ''. duplicate matcher is: {"server_names":["a.com"]}`},
	{"filter chains sharing a server name", "listeners", chains("", "filter_chain_match: {server_names: [a.com, b.com]}, ", "filter_chain_match: {server_names: [B.com]}, "),
		"filter_chains[1].filter_chain_match", "multiple filter chains with overlapping matching rules are defined"},
	{"filter chains of one wildcard server name", "listeners", chains("", "filter_chain_match: {server_names: ['*.a.com']}, ", "filter_chain_match: {server_names: ['.a.com']}, "),
		"filter_chains[1].filter_chain_match", "multiple filter chains with overlapping matching rules are defined"},
	{"filter chains of one network", "listeners", chains("", "filter_chain_match: {prefix_ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}]}, ", "filter_chain_match: {prefix_ranges: [{address_prefix: 10.1.2.3, prefix_len: 8}]}, "),
		"filter_chains[1].filter_chain_match", "multiple filter chains with overlapping matching rules are defined"},
	{"filter chains sharing a source port", "listeners", chains("", "filter_chain_match: {source_ports: [1, 2]}, ", "filter_chain_match: {source_ports: [2]}, "),
		"filter_chains[1].filter_chain_match", "multiple filter chains with overlapping matching rules are defined"},
	{"filter chain matcher with an unnamed chain", "listeners", chains(chainNamedA, "name: a, ", ""),
		"filter_chains[1].name", `"name" field is required when using a listener matcher`},
	{"filter chain matcher with two chains of one name", "listeners", chains(chainNamedA, "name: a, ", "name: a, "),
		"filter_chains[1].name", `"name" field is duplicated with value 'a'`},

	// Found by TestAdmittedLoadsInEnvoy (translate): admitted, and refused
	// by Envoy.
	{"filter chain listing a server name twice", "listeners", chains("", "filter_chain_match: {server_names: [a.com, A.com]}, "),
		"filter_chains[0].filter_chain_match", "multiple filter chains with overlapping matching rules are defined"},
	{"EDS cluster without the config source of its endpoints", "clusters", `{name: c, type: EDS, eds_cluster_config: {}}`,
		"eds_cluster_config.eds_config", "Missing config source specifier in envoy::config::core::v3::ConfigSource"},
	{"RDS without a config source", "listeners", hcmListener("80", router, `rds: {route_config_name: r}`),
		"rds.config_source", "An RDS config must have either a 'config_source' or an xDS-TP based 'route_config_name'"},
	{"weighted cluster without a weight", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {weighted_clusters: {clusters: [{name: a}, {name: b, weight: 1}]}}}]}]}`,
		"route.weighted_clusters.clusters[0].weight", "Field 'weight' is missing in"},
	{"lb_endpoint without its endpoint", "endpoints", `{cluster_name: c, endpoints: [{lb_endpoints: [{}]}]}`,
		"endpoints[0].lb_endpoints[0].endpoint", "Address must be set"},
	{"lb_endpoint by name", "endpoints", `{cluster_name: c, endpoints: [{lb_endpoints: [{endpoint_name: x}]}]}`,
		"endpoints[0].lb_endpoints[0].endpoint", "Address must be set"},
	{"Zipkin tracer on the deprecated default endpoint version", "listeners", hcmListener("80", router, rds+`, tracing: {provider: {name: z, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig, collector_cluster: xds_cluster, collector_endpoint: /api}}}`),
		"typed_config(ZipkinConfig).collector_endpoint_version", "Using the default now-deprecated value DEPRECATED_AND_UNAVAILABLE_DO_NOT_USE for enum 'envoy.config.trace.v3.ZipkinConfig.collector_endpoint_version'"},
	{"Zipkin tracer without a collector endpoint", "listeners", hcmListener("80", router, rds+`, tracing: {provider: {name: z, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig, collector_cluster: xds_cluster, collector_endpoint_version: HTTP_JSON}}}`),
		"tracing.provider.typed_config(ZipkinConfig)", "collector_cluster and collector_endpoint must be specified when not using collector_service"},
	{"secret without content", "secrets", `{name: s}`,
		`("s")`, "Secret type not implemented"},
}

// envoyValidCases are edge cases Envoy loads: they must be admitted.
var envoyValidCases = []struct{ name, kind, yaml string }{
	{"listener on port 0", "listeners", `{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`},
	{"listener on :: with ipv4_compat", "listeners", `{name: l, address: {socket_address: {address: "::", port_value: 80, ipv4_compat: true}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`},
	{"listener on an IPv4-mapped address with ipv4_compat", "listeners", `{name: l, address: {socket_address: {address: "::ffff:10.0.0.1", port_value: 80, ipv4_compat: true}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`},
	{"listener on the ready port of another address", "listeners", `{name: l, address: {socket_address: {address: 10.0.0.5, port_value: 19001}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`},
	{"listener on the admin port of another address", "listeners", `{name: l, address: {socket_address: {address: 10.0.0.5, port_value: 19000}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`},
	{"listener that does not bind the ready address", "listeners", `{name: l, bind_to_port: false, address: {socket_address: {address: 0.0.0.0, port_value: 19000}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`},
	{"listener with an empty filter chain", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, filter_chains: [{filters: []}]}`},
	{"listener with only a default filter chain", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, default_filter_chain: {filters: [` + tcpProxy + `]}}`},
	{"HTTP filters ending in the router", "listeners", hcmListener("80", `{name: cors, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}, `+router, rds)},
	{"optional HTTP filter of another kind", "listeners", hcmListener("80", `{name: x, is_optional: true, typed_config: {`+hcmType+`, stat_prefix: x, `+rds+`}}, `+router, rds)},
	{"upgrade config without filters", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 80}}, filter_chains: [{filters: [{name: hcm, typed_config: {` + hcmType + `, stat_prefix: h, ` + rds + `, http_filters: [` + router + `], upgrade_configs: [{upgrade_type: websocket}, {upgrade_type: CONNECT}]}}]}]}`},
	{"downstream TLS in a listener", "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 443}}, filter_chains: [{transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": ` + downTLSType + `, common_tls_context: {tls_certificate_sds_secret_configs: [{name: s, sds_config: {ads: {}}}]}}}, filters: [` + tcpProxy + `]}]}`},
	{"listener on a link-local address with a zone", "listeners", `{name: l, address: {socket_address: {address: "fe80::1%lo", port_value: 80}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`},
	{"listener on an IPv4-mapped address in capitals with ipv4_compat", "listeners", `{name: l, address: {socket_address: {address: "::FFFF:10.0.0.1", port_value: 80, ipv4_compat: true}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`},
	{"two named health checks", "clusters", `{name: c, type: EDS, ` + edsConfig + `, health_checks: [{name: a, timeout: 1s, interval: 1s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {}}, {name: b, timeout: 1s, interval: 1s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {}}]}`},
	{"one domain in exact, prefix and suffix forms", "routes", `{name: r, virtual_hosts: [{name: a, domains: ["example.com", "example.com*"]}, {name: b, domains: ["*example.com", "*"]}]}`},
	{"two virtual hosts of one name", "routes", `{name: r, virtual_hosts: [{name: v, domains: [a.com]}, {name: v, domains: [b.com]}]}`},
	{"regex RE2 accepts", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {safe_regex: {regex: "^/v1/(users|groups)/[^/]+/items/[a-f0-9]{32}$"}}, route: {cluster: c}}]}]}`},
	{"regex with a named group and Unicode class", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {safe_regex: {regex: "^/(?P<lang>[a-z]{2})/\\pL+$"}}, route: {cluster: c}}]}]}`},
	{"direct response body at the limit", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, direct_response: {status: 200, body: {inline_string: "` + strings.Repeat("x", 4096) + `"}}}]}]}`},
	{"zero durations", "clusters", `{name: c, type: EDS, ` + edsConfig + `, connect_timeout: 0.001s, dns_refresh_rate: 1s, common_lb_config: {update_merge_window: 0s}}`},
	{"retry back-off max equal to base", "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: c, retry_policy: {retry_back_off: {base_interval: 0.0001s, max_interval: 0.0002s}}}}]}]}`},
	{"STRICT_DNS cluster on a host name", "clusters", staticCluster("STRICT_DNS", "backend.default.svc")},
	{"LOGICAL_DNS cluster with one endpoint", "clusters", staticCluster("LOGICAL_DNS", "backend.default.svc")},
	{"STATIC cluster on an IPv6 address", "clusters", staticCluster("STATIC", `"2001:db8::1"`)},
	{"ORIGINAL_DST cluster", "clusters", `{name: c, type: ORIGINAL_DST, lb_policy: CLUSTER_PROVIDED}`},
	{"maglev table size prime", "clusters", `{name: c, type: EDS, ` + edsConfig + `, lb_policy: MAGLEV, maglev_lb_config: {table_size: 65537}}`},
	{"ring hash bounds equal", "clusters", `{name: c, type: EDS, ` + edsConfig + `, lb_policy: RING_HASH, ring_hash_lb_config: {minimum_ring_size: 2048, maximum_ring_size: 2048}}`},
	{"subset config without selectors and CLUSTER_PROVIDED", "clusters", `{name: c, type: ORIGINAL_DST, lb_policy: CLUSTER_PROVIDED, lb_subset_config: {}}`},
	{"ALPN with TLS", "clusters", `{name: c, type: EDS, ` + edsConfig + `, transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": ` + upTLSType + `}}, typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, auto_config: {}}}}`},
	{"EDS endpoint on an IPv6 address", "endpoints", `{cluster_name: c, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: "fd00::1", port_value: 80}}}}]}]}`},
	{"Zipkin tracer", "listeners", hcmListener("80", router, rds+`, tracing: {provider: {name: z, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig, collector_cluster: xds_cluster, collector_endpoint: /api, collector_endpoint_version: HTTP_JSON}}}`)},
	{"cluster filter", "clusters", `{name: c, type: EDS, ` + edsConfig + `, filters: [` + typed("f", "google.protobuf.Empty", "") + `]}`},
	{"matcher on a request header to a route", "routes", vhMatcher(`{matcher_tree: {input: ` + headerInput + `, exact_match_map: {map: {yy: {action: ` + routeAction + `}}}}}`)},
	{"matcher to a list of routes", "routes", vhMatcher(`{on_no_match: {action: {name: a, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.RouteList, routes: [{match: {prefix: /}, direct_response: {status: 200}}]}}}}`)},
	{"matcher tree with an IP custom matcher", "routes", vhMatcher(`{matcher_tree: {input: ` + headerInput + `, custom_match: ` + typed("c", "xds.type.matcher.v3.IPMatcher", "") + `}}`)},
	{"generic matcher regex over the program size of the route API", "routes", vhMatcher(`{matcher_list: {matchers: [{predicate: {single_predicate: {input: ` + headerInput + `, value_match: {safe_regex: {google_re2: {}, regex: "^/api/v[0-9]+/users/[a-z0-9-]{1,64}$"}}}}, on_match: {action: ` + routeAction + `}}]}}`)},
	{"RBAC matcher on a request header", "listeners", hcmListener("80", `{name: rbac, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC, matcher: {matcher_tree: {input: `+headerInput+`, exact_match_map: {map: {yy: {action: `+typed("a", "envoy.config.rbac.v3.Action", ", name: x")+`}}}}}}}, `+router, rds)},
	{"discovered HTTP filter defaulting to a type it takes", "listeners", hcmListener("80", `{name: cors, config_discovery: {config_source: {ads: {}}, default_config: {"@type": `+corsType+`}, type_urls: [`+corsType+`]}}, `+router, rds)},
	{"RBAC permission nested as deep as Envoy takes", "listeners", hcmListener("80", rbacNested(96)+`, `+router, rds)},
	{"filter chains of one transport protocol in two cases", "listeners", chains("", "filter_chain_match: {transport_protocol: tls}, ", "filter_chain_match: {transport_protocol: TLS}, ")},
	{"filter chains on any port and on one", "listeners", chains("", "filter_chain_match: {transport_protocol: tls}, ", "filter_chain_match: {transport_protocol: tls, destination_port: 80}, ")},
	{"filter chains of one name without a matcher", "listeners", chains("", "name: a, filter_chain_match: {server_names: [a.com]}, ", "name: a, ")},
	{"filter chain matcher with named chains of one match", "listeners", chains(chainNamedA, "name: a, filter_chain_match: {server_names: [a.com]}, ", "name: b, filter_chain_match: {server_names: [a.com]}, ")},
}

// proxylessCases are resources admission admits that only proxyless gRPC
// clients take: Envoy refuses them, and so a fleet that runs Envoy must not
// be served them. Admission does not know which a fleet runs.
var proxylessCases = []envoyRuleCase{
	{"proxyless gRPC API listener", "listeners", `{name: l, api_listener: {api_listener: {` + hcmType + `, stat_prefix: h, ` + rds + `, http_filters: [` + router + `]}}}`,
		"", "error adding listener named 'l': missing the API listener extension"},
}

// parseOne parses yaml as the one resource of kind (listeners, routes,
// clusters, endpoints or secrets) of an EnvoyConfig.
func parseOne(kind, yaml string) ([]Resource, []error) {
	res := examplev1.EnvoyResources{}
	k, err := KindNamed(kind)
	if err != nil {
		return nil, []error{err}
	}
	*k.List(&res) = []runtime.RawExtension{raw(yaml)}
	return Parse("ns/a", res)
}

// Every rule Envoy applies when it loads a resource refuses the resource,
// naming the field.
func TestEnvoyLoadRules(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range envoyRuleCases {
		if seen[tc.name] {
			t.Fatalf("two cases named %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			if tc.envoy == "" {
				t.Fatal("the case gives no Envoy message")
			}
			got, errs := parseOne(tc.kind, tc.yaml)
			if len(errs) != 1 || len(got) != 0 {
				t.Fatalf("got %d resources and errors %v, want it refused (Envoy: %s)", len(got), errs, tc.envoy)
			}
			if !strings.Contains(errs[0].Error(), "spec.resources."+tc.kind+"[0]") || !strings.Contains(errs[0].Error(), tc.field+":") {
				t.Errorf("error %q does not name %s (Envoy: %s)", errs[0], tc.field, tc.envoy)
			}
		})
	}
}

func TestEnvoyLoadRulesAdmitValid(t *testing.T) {
	cases := envoyValidCases
	for _, tc := range proxylessCases {
		cases = append(cases, struct{ name, kind, yaml string }{tc.name, tc.kind, tc.yaml})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, errs := parseOne(tc.kind, tc.yaml); len(errs) != 0 {
				t.Errorf("refused: %v", errs)
			}
		})
	}
}

// Every extension of the table is one extensions.go imports, so that it
// decodes; a name the registry does not know would be refused everywhere.
func TestEveryServedExtensionHasAPlace(t *testing.T) {
	kinds := map[string]bool{}
	for name, ext := range extensions {
		if ext.kind == "" || ext.name == "" {
			t.Errorf("%s has no kind or name", name)
		}
		if _, err := protoregistry.GlobalTypes.FindMessageByName(name); err != nil {
			t.Errorf("%s: %v: import its package in extensions.go", name, err)
		}
		kinds[ext.kind] = true
	}
	for _, k := range []string{networkFilter, httpFilter, listenerFilter, downstreamTLS, upstreamTLS, accessLogger, compressionLib, protocolOptions} {
		if !kinds[k] {
			t.Errorf("no extension is a %s", k)
		}
	}
}

// Two listeners of one EnvoyConfig on one address: Envoy refuses the second
// ("error adding listener: 'b' has duplicate address '0.0.0.0:80' as
// existing listener"). On the same port of another address, or over UDP,
// they are two listeners Envoy takes.
func TestParseListenersShareAnAddress(t *testing.T) {
	on := func(name, address, protocol string) runtime.RawExtension {
		return raw(`{name: ` + name + `, address: {socket_address: {address: "` + address + `", port_value: 80, protocol: ` + protocol + `}}, filter_chains: [{filters: [` + tcpProxy + `]}]}`)
	}
	udp := func(name, address string) runtime.RawExtension {
		return raw(`{name: ` + name + `, address: {socket_address: {address: "` + address + `", port_value: 80, protocol: UDP}}}`)
	}
	_, errs := Parse("ns/a", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{on("a", "0.0.0.0", "TCP"), on("b", "0.0.0.0", "TCP")}})
	want := `spec.resources.listeners[1] ("b"): address: 0.0.0.0:80 is also the address of listener "a" (spec.resources.listeners[0])`
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
		t.Errorf("errors %v, want one saying %s", errs, want)
	}
	rs, errs := Parse("ns/a", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{
		on("a", "0.0.0.0", "TCP"), on("b", "127.0.0.1", "TCP"), on("c", "::", "TCP"), udp("d", "0.0.0.0"),
	}})
	if len(errs) != 0 || len(rs) != 4 {
		t.Errorf("got %d listeners and errors %v, want all four", len(rs), errs)
	}
}

// envoyListenCase is listeners of one EnvoyConfig, on one port, that Envoy
// loads (in validate mode, and over LDS) but cannot all listen on: it drops
// one when it binds it or starts to listen, or, given them in its
// bootstrap, exits. field is empty for listeners Envoy listens on.
type envoyListenCase struct {
	name string
	// admin puts the admin interface on the port too (19000 for admission).
	admin     bool
	listeners []string // PORT is their port (8080 for admission)
	field     string
	envoy     string // what Envoy says, PORT its port
}

// onPort is a listener named name on address:PORT with the fields extra.
func onPort(name, address, extra string) string {
	return `{name: ` + name + `, address: {socket_address: {address: "` + address + `", port_value: PORT` + extra + `}}, filter_chains: [{filters: [` + tcpProxy + `]}]`
}

const compat = `, ipv4_compat: true`

var envoyListenCases = []envoyListenCase{
	{"listener on the admin interface's port", true, []string{onPort("a", "0.0.0.0", "") + `}`},
		"address.socket_address", "cannot bind '0.0.0.0:PORT': Address already in use"},
	{"listener on the admin interface's address, IPv4-mapped", true, []string{onPort("a", "::ffff:127.0.0.1", compat) + `}`},
		"address.socket_address", "cannot bind '[::ffff:127.0.0.1]:PORT': Address already in use"},
	{"IPv4-mapped address without ipv4_compat", false, []string{onPort("a", "::ffff:127.0.0.1", "") + `}`},
		"address.socket_address.ipv4_compat", "cannot bind '[::ffff:127.0.0.1]:PORT': Invalid argument"},
	{"wildcard without SO_REUSEPORT beside a specific address", false, []string{onPort("a", "0.0.0.0", "") + `, enable_reuse_port: false}`, onPort("b", "127.0.0.1", "") + `}`},
		"listeners[1]", "final pre-worker listener init for listener 'b' failed: cannot listen() errno=98"},
	{"specific address without SO_REUSEPORT beside a wildcard", false, []string{onPort("a", "0.0.0.0", "") + `}`, onPort("b", "127.0.0.1", "") + `, enable_reuse_port: false}`},
		"listeners[1]", "final pre-worker listener init for listener 'b' failed: cannot listen() errno=98"},
	{"IPv4 without SO_REUSEPORT beside the same address IPv4-mapped", false, []string{onPort("a", "127.0.0.1", "") + `, enable_reuse_port: false}`, onPort("b", "::ffff:127.0.0.1", compat) + `}`},
		"listeners[1]", "final pre-worker listener init for listener 'b' failed: cannot listen() errno=98"},
	{"IPv6 wildcard taking IPv4 without SO_REUSEPORT beside the IPv4 wildcard", false, []string{onPort("a", "::", compat) + `, enable_reuse_port: false}`, onPort("b", "0.0.0.0", "") + `}`},
		"listeners[1]", "final pre-worker listener init for listener 'b' failed: cannot listen() errno=98"},
	{"IPv6 wildcard without SO_REUSEPORT beside ::1", false, []string{onPort("a", "::", "") + `, enable_reuse_port: false}`, onPort("b", "::1", "") + `}`},
		"listeners[1]", "final pre-worker listener init for listener 'b' failed: cannot listen() errno=98"},
	{"wildcard beside a specific address", false, []string{onPort("a", "0.0.0.0", "") + `}`, onPort("b", "127.0.0.1", "") + `}`}, "", ""},
	{"IPv4 beside the same address IPv4-mapped", false, []string{onPort("a", "127.0.0.1", "") + `}`, onPort("b", "::ffff:127.0.0.1", compat) + `}`}, "", ""},
	{"IPv6-only wildcard without SO_REUSEPORT beside the IPv4 wildcard", false, []string{onPort("a", "::", "") + `, enable_reuse_port: false}`, onPort("b", "0.0.0.0", "") + `}`}, "", ""},
	{"IPv6-only wildcard without SO_REUSEPORT beside an IPv4-mapped address", false, []string{onPort("a", "::", "") + `, enable_reuse_port: false}`, onPort("b", "::ffff:127.0.0.1", compat) + `}`}, "", ""},
	{"two addresses without SO_REUSEPORT", false, []string{onPort("a", "127.0.0.1", "") + `, enable_reuse_port: false}`, onPort("b", "127.0.0.2", "") + `, enable_reuse_port: false}`}, "", ""},
}

// listenersOn returns c's listeners, on port (the admin interface's when
// c.admin), for an EnvoyConfig.
func (c envoyListenCase) listenersOn(port string) []runtime.RawExtension {
	var out []runtime.RawExtension
	for _, l := range c.listeners {
		out = append(out, raw(strings.ReplaceAll(l, "PORT", port)))
	}
	return out
}

// Admission refuses listeners Envoy cannot listen on, naming the field, and
// admits those it can.
func TestEnvoyListenRules(t *testing.T) {
	for _, tc := range envoyListenCases {
		t.Run(tc.name, func(t *testing.T) {
			port := "8080"
			if tc.admin {
				port = "19000"
			}
			_, errs := Parse("ns/a", examplev1.EnvoyResources{Listeners: tc.listenersOn(port)})
			switch {
			case tc.field == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.field != "" && len(errs) != 1:
				t.Errorf("errors %v, want one (Envoy: %s)", errs, tc.envoy)
			case tc.field != "" && !strings.Contains(errs[0].Error(), tc.field+":") && !strings.Contains(errs[0].Error(), tc.field+" "):
				t.Errorf("error %q does not name %s", errs[0], tc.field)
			}
		})
	}
}
