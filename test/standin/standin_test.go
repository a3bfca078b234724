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
// contexts name, inside their typed configurations, each once.
func TestSecretNames(t *testing.T) {
	sds := func(names ...string) []*tlsv3.SdsSecretConfig {
		var out []*tlsv3.SdsSecretConfig
		for _, n := range names {
			out = append(out, &tlsv3.SdsSecretConfig{Name: n})
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
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "clients-ca"},
			},
		}})},
		{TransportSocket: socket(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: sds("web-cert")}})},
	}}
	cluster := &clusterv3.Cluster{Name: "backend", TransportSocket: socket(&tlsv3.UpstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: sds("client-cert")}})}
	plain := &clusterv3.Cluster{Name: "plain"}

	got := secretNames([]*anypb.Any{anyOf(t, listener), anyOf(t, cluster), anyOf(t, plain)})
	if want := []string{"api-cert", "client-cert", "clients-ca", "web-cert"}; !slices.Equal(got, want) {
		t.Errorf("secret names %v, want %v", got, want)
	}
	if got := secretNames([]*anypb.Any{anyOf(t, plain)}); len(got) != 0 {
		t.Errorf("a cluster without TLS names secrets %v", got)
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
