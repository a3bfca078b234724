package server

import (
	"net"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fleetid "github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// weighted is a load assignment of one endpoint, 127.0.0.1:port, with the
// locality and weight proxyless gRPC requires.
func weighted(name string, port int) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		Locality: &corev3.Locality{Zone: "z1"}, LoadBalancingWeight: wrapperspb.UInt32(1),
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}}}}}}},
	}}}
}

// greeterFleet is a fleet of several services, of which the gRPC client
// uses one, "greeter": listeners, routes and clusters of other services, a
// route configuration no listener uses, a cluster that is not EDS, and the
// endpoints of clusters the client never asks for.
func greeterFleet(port, other int) map[string][]types.Resource {
	static := &clusterv3.Cluster{Name: "static", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: weighted("static", other)}
	return fleetOf(
		listener("greeter", "greeter-route", 0), listener("orders", "orders-route", 0), listener("billing", "billing-route", 0),
		route("greeter-route", "greeter", 0), route("orders-route", "orders", 0), route("billing-route", "static", 0), route("unused-route", "orders", 0),
		cluster("greeter", 0), cluster("orders", 0), static,
		weighted("greeter", port), weighted("orders", other), weighted("unused", other), weighted("static", other),
		secret("unused-secret", 0))
}

// grpc-go's own xDS client, with the fleet's client certificate, takes one
// service's configuration from a fleet that holds several: it subscribes
// by name to its listener, route, cluster and endpoints, is served them,
// sends RPCs to the backend they name, and follows a change.
func TestGRPCGoClientOfABiggerFleet(t *testing.T) {
	a := newAuthority(t)
	s, addr := startTLSServer(t, a)
	portA, portB, other := xdstest.HealthBackend(t, "A"), xdstest.HealthBackend(t, "B"), xdstest.HealthBackend(t, "other")
	mustPublish(t, s, "v1", greeterFleet(portA, other))

	leaf, err := pki.IssueClient(a, fleetid.ID{Namespace: "ns", Name: "edge"}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := xdstest.GRPCBootstrap(t, "localhost:"+port, fleet, "grpc-client-1", leaf.Cert, leaf.Key, a.Bundle())
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	served := func(name string) bool { return xdstest.Serves(conn, name, 5*time.Second) }
	eventually(t, "RPCs to reach backend A", func() bool { return served("A") })
	waitCounts(t, s, "v1", ProxyCounts{Connected: 1, Acked: 1})

	// The greeter's endpoints move to backend B, and another service
	// changes: the client follows, without a restart.
	next := greeterFleet(portB, other)
	next = with(without(next, resourcev3.ClusterType, "orders"), cluster("orders", 1))
	mustPublish(t, s, "v2", next)
	eventually(t, "RPCs to move to backend B", func() bool { return served("B") && !served("A") })
	waitCounts(t, s, "v2", ProxyCounts{Connected: 1, Acked: 1})
}
