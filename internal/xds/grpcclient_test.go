package xds

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
)

// healthBackend starts a gRPC server whose health service knows one service
// name, so that a client can tell which backend answered.
func healthBackend(t *testing.T, name string) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	h := health.NewServer()
	h.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, h)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().(*net.TCPAddr).Port
}

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
	ctx := context.Background()
	a := newAuthority(t)
	s, addr := startTLSServer(t, a)
	portA, portB, other := healthBackend(t, "A"), healthBackend(t, "B"), healthBackend(t, "other")
	mustPublish(t, s, "v1", greeterFleet(portA, other))

	leaf, err := pki.IssueClient(a, "ns", "edge", time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": a.Bundle()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": "localhost:%s", "server_features": ["xds_v3"], "channel_creds": [{"type": "tls", "config": {
    "certificate_file": %q, "private_key_file": %q, "ca_certificate_file": %q}}]}],
  "node": {"id": "grpc-client-1", "cluster": %q}
}`, port, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"), fleet)
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	// served reports whether the backend that answers knows service name.
	served := func(name string) bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := hc.Check(rctx, &healthpb.HealthCheckRequest{Service: name})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}
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
