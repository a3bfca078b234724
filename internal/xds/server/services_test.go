package server

import (
	"context"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// healthService is a Service: gRPC's health service.
type healthService struct{ *health.Server }

func (h healthService) Register(s *grpc.Server) { healthpb.RegisterHealthServer(s, h.Server) }

// A service added to the server (AddService) is served on its port beside
// ADS, over the same connection. (The stats receiver's test in package
// stats proves it with a real Envoy.)
func TestAddedServiceOnTheXDSPort(t *testing.T) {
	s, addr := startServerWith(t, func(s *Server) { s.AddService(healthService{health.NewServer()}) })
	if err := s.SetFleet(context.Background(), fleet, "v1", map[string][]types.Resource{resourcev3.ClusterType: {cluster("c1", 0)}}); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p := xdstest.Connect(t, discoveryv3.NewAggregatedDiscoveryServiceClient(conn), fleet, "p1", resourcev3.ClusterType)
	if resp, err := p.Next(""); err != nil || len(resp.GetResources()) != 1 {
		t.Fatalf("ADS answered %v, %v; want the fleet's cluster", resp, err)
	}
	got, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || got.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("the added service answered %v, %v; want SERVING", got, err)
	}
}
