package standin

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The secrets a proxy asks for are those its listeners' and clusters' TLS
// contexts ask this server for, inside their typed configurations, each
// once; and the endpoints of its EDS clusters.
func TestNamedBy(t *testing.T) {
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	sds := func(names ...string) []*tlsv3.SdsSecretConfig {
		var out []*tlsv3.SdsSecretConfig
		for _, n := range names {
			out = append(out, &tlsv3.SdsSecretConfig{Name: n, SdsConfig: ads})
		}
		return out
	}
	socket := func(m proto.Message) *corev3.TransportSocket {
		return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: anyOf(t, m)}}
	}
	listener := &listenerv3.Listener{Name: "https", FilterChains: []*listenerv3.FilterChain{
		{TransportSocket: socket(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: sds("web-cert", "api-cert"),
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "clients-ca", SdsConfig: ads},
			},
		}})},
		{TransportSocket: socket(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: sds("web-cert")}})},
		// A static secret of the bootstrap is not asked for.
		{TransportSocket: socket(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "static"}}}})},
	}}
	cluster := &clusterv3.Cluster{Name: "backend", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads},
		TransportSocket: socket(&tlsv3.UpstreamTlsContext{
			CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: sds("client-cert")}})}
	plain := &clusterv3.Cluster{Name: "plain"}

	got := namedBy(map[string][]*anypb.Any{resourcev3.ListenerType: {anyOf(t, listener)}, resourcev3.ClusterType: {anyOf(t, cluster), anyOf(t, plain)}})
	if want := []string{"api-cert", "client-cert", "clients-ca", "web-cert"}; !slices.Equal(got[resourcev3.SecretType], want) {
		t.Errorf("secret names %v, want %v", got[resourcev3.SecretType], want)
	}
	if want := []string{"backend"}; !slices.Equal(got[resourcev3.EndpointType], want) {
		t.Errorf("endpoints %v, want %v", got[resourcev3.EndpointType], want)
	}
	if got := namedBy(map[string][]*anypb.Any{resourcev3.ClusterType: {anyOf(t, plain)}}); len(got) != 0 {
		t.Errorf("a cluster without TLS names %v", got)
	}
}

// A stand-in asks for every type, in the order of a push, as an Envoy whose
// bootstrap sends everything to ADS does: secrets by name.
func TestEverything(t *testing.T) {
	want := []Subscription{
		{TypeURL: resourcev3.ClusterType}, {TypeURL: resourcev3.EndpointType},
		{TypeURL: resourcev3.ListenerType}, {TypeURL: resourcev3.RouteType},
		{TypeURL: resourcev3.SecretType, Named: true},
	}
	got := Everything()
	if !slices.EqualFunc(got, want, func(a, b Subscription) bool {
		return a.TypeURL == b.TypeURL && a.Named == b.Named && len(a.Names) == 0
	}) {
		t.Errorf("Everything() = %+v, want %+v", got, want)
	}
}
