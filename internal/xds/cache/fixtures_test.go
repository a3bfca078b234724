package cache

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fleet is the tests' fleet.
const fleet = "ns/edge"

// testNames are the names a stream of the tests may subscribe to.
var testNames = NameLimits{Count: 10000, Bytes: 4 << 20}

// cluster is the EDS cluster name, at generation g.
func cluster(name string, g int) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Duration(g+1) * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, ResourceApiVersion: corev3.ApiVersion_V3}}}
}

// assignment is the endpoints of cluster name: one, listening on port.
func assignment(name string, port int) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}}}}}}}}}}
}

// clusters is a publication of the clusters named names.
func clusters(names ...string) map[string][]types.Resource {
	var rs []types.Resource
	for _, n := range names {
		rs = append(rs, cluster(n, 0))
	}
	return map[string][]types.Resource{resourcev3.ClusterType: rs}
}

// secrets is a publication of cluster a and the secrets named names.
func secrets(names ...string) map[string][]types.Resource {
	r := clusters("a")
	for _, n := range names {
		r[resourcev3.SecretType] = append(r[resourcev3.SecretType], &tlsv3.Secret{Name: n})
	}
	return r
}

// everyKind is a publication with two resources of each type served.
func everyKind() map[string][]types.Resource {
	out := map[string][]types.Resource{}
	for i := range 2 {
		n := fmt.Sprint("r", i)
		out[resourcev3.ListenerType] = append(out[resourcev3.ListenerType], &listenerv3.Listener{Name: n})
		out[resourcev3.RouteType] = append(out[resourcev3.RouteType], &routev3.RouteConfiguration{Name: n})
		out[resourcev3.ClusterType] = append(out[resourcev3.ClusterType], cluster(n, i))
		out[resourcev3.EndpointType] = append(out[resourcev3.EndpointType], assignment(n, 8080+i))
		out[resourcev3.SecretType] = append(out[resourcev3.SecretType], &tlsv3.Secret{Name: n})
	}
	return out
}

// endpointsOf50 is the endpoints of 50 clusters; c0's listens on port.
func endpointsOf50(port int) []types.Resource {
	var out []types.Resource
	for i := range 50 {
		p := 8080
		if i == 0 {
			p = port
		}
		out = append(out, assignment(fmt.Sprintf("c%d", i), p))
	}
	return out
}
