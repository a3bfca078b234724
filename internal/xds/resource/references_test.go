package resource

import (
	"slices"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// decodeOne decodes yaml, a resource of the list field.
func decodeOne(t *testing.T, field, yaml string) types.Resource {
	t.Helper()
	k, err := KindNamed(field)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := decode(k, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const (
	sds       = `sds_config: {ads: {}, resource_api_version: V3}`
	tlsServer = `transport_socket: {name: tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext, ` +
		`common_tls_context: {tls_certificate_sds_secret_configs: [{name: server, ` + sds + `}]}}}`
	tlsClient = `transport_socket: {name: tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, ` +
		`common_tls_context: {validation_context_sds_secret_config: {name: ca, ` + sds + `}}}}`
	hcmRDS = `{name: hcm, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, stat_prefix: h, ` +
		`rds: {route_config_name: web, config_source: {ads: {}, resource_api_version: V3}}, http_filters: [{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]}}`
	tcpTo = `{name: tcp, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: passthrough}}`
)

// What each kind names, a proxy asks for, and translate checks.
func TestReferences(t *testing.T) {
	listener := decodeOne(t, "listeners", `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 443}}, filter_chains: [{`+tlsServer+`, filters: [`+hcmRDS+`]}], `+
		`default_filter_chain: {filters: [`+tcpTo+`]}}`)
	route := decodeOne(t, "routes", `{name: web, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {weighted_clusters: {clusters: [{name: a, weight: 1}, {name: b, weight: 1}]}}}]}]}`)
	cluster := decodeOne(t, "clusters", `{name: a, type: EDS, connect_timeout: 1s, eds_cluster_config: {service_name: a-endpoints, eds_config: {ads: {}, resource_api_version: V3}}, `+tlsClient+`}`)
	endpoints := decodeOne(t, "endpoints", `{cluster_name: a-endpoints}`)
	for _, tc := range []struct {
		m    types.Resource
		want []Reference
	}{
		{listener, []Reference{{TypeURL: resourcev3.SecretType, Name: "server"}, {TypeURL: resourcev3.RouteType, Name: "web"}, {TypeURL: resourcev3.ClusterType, Name: "passthrough"}}},
		{route, []Reference{{TypeURL: resourcev3.ClusterType, Name: "a"}, {TypeURL: resourcev3.ClusterType, Name: "b"}}},
		{cluster, []Reference{{TypeURL: resourcev3.EndpointType, Name: "a-endpoints", Warming: true}, {TypeURL: resourcev3.SecretType, Name: "ca"}}},
		{endpoints, nil},
	} {
		if got := References(tc.m); !slices.Equal(got, tc.want) {
			t.Errorf("%T: %v, want %v", tc.m, got, tc.want)
		}
	}
	// A proxy holds every listener and cluster, and asks for the rest by
	// the names they give.
	got := Subscribed([]types.Resource{listener, cluster})
	want := map[string][]string{resourcev3.RouteType: {"web"}, resourcev3.SecretType: {"server", "ca"}, resourcev3.EndpointType: {"a-endpoints"}}
	if len(got) != len(want) {
		t.Errorf("Subscribed: %v, want %v", got, want)
	}
	for typeURL, names := range want {
		if !slices.Equal(got[typeURL], names) {
			t.Errorf("Subscribed: %s: %v, want %v", typeURL, got[typeURL], names)
		}
	}
}
