package server

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// sdsTLS is a transport socket whose certificate comes over SDS (ADS), by name.
func sdsTLS(t *testing.T, downstream bool, secretName string) *corev3.TransportSocket {
	t.Helper()
	common := &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: secretName,
		SdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			ResourceApiVersion: corev3.ApiVersion_V3}}}}
	var m proto.Message = &tlsv3.UpstreamTlsContext{CommonTlsContext: common}
	if downstream {
		m = &tlsv3.DownstreamTlsContext{CommonTlsContext: common}
	}
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

// envoyFleet holds what its proxies use and more: a route configuration no
// listener names, a secret nobody names, a load assignment of a cluster
// that is not EDS and one of no cluster.
func envoyFleet(t *testing.T) map[string][]types.Resource {
	t.Helper()
	https := listener("https", "web-route", 0)
	hcm := https.GetApiListener().GetApiListener()
	https.ApiListener = nil
	https.Address = &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8443}}}}
	https.FilterChains = []*listenerv3.FilterChain{{TransportSocket: sdsTLS(t, true, "server-cert"),
		Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}}
	web := cluster("web", 0)
	web.TransportSocket = sdsTLS(t, false, "client-cert")
	static := &clusterv3.Cluster{Name: "static", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: weighted("static", 9000)}
	return fleetOf(https, route("web-route", "web", 0), route("unused-route", "static", 0),
		web, static, weighted("web", 9001), weighted("static", 9000), weighted("nobody", 9002),
		secret("server-cert", 0), secret("client-cert", 0), secret("unused-secret", 0))
}

// A client that subscribes as Envoy does (listeners and clusters to all,
// then by name the routes, endpoints and secrets they name) is served all
// it asks for by a fleet that holds more than its proxies use, over state
// of the world and over delta.
func TestEnvoySubscriptionPattern(t *testing.T) {
	want := xdstest.Served{
		resourcev3.ClusterType: {"static", "web"}, resourcev3.ListenerType: {"https"}, resourcev3.EndpointType: {"web"},
		resourcev3.RouteType: {"web-route"}, resourcev3.SecretType: {"client-cert", "server-cert"},
	}
	a := newAuthority(t)
	s, addr := startTLSServer(t, a)
	mustPublish(t, s, "v1", envoyFleet(t))
	c := dialAs(t, addr, a, "ns", "edge")
	for name, sub := range map[string]xdstest.Subscriber{
		"sotw":  xdstest.OpenADS(t, c, fleet, "envoy-sotw").Subscriber(),
		"delta": xdstest.OpenDelta(t, c, fleet, "envoy-delta").Subscriber(),
	} {
		served, err := xdstest.SubscribeAsEnvoy(sub)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for typ, names := range want {
			if !slices.Equal(served[typ], names) {
				t.Errorf("%s: %s served %v, want %v", name, short(typ), served[typ], names)
			}
		}
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 2, Acked: 2})
}
