package xdstest

import (
	"net"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
)

// silentADS accepts streams, reads their requests and never answers.
type silentADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
}

func (silentADS) StreamAggregatedResources(st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	for {
		if _, err := st.Recv(); err != nil {
			return err
		}
	}
}

// A server that never answers fails Next after the proxy's Timeout, and the
// stream is closed, instead of Next waiting for ever.
func TestNextTimesOutOnASilentServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, silentADS{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	p := Connect(t, Dial(t, lis.Addr().String()), "ns/edge", "pod-1", resourcev3.ClusterType)
	p.Timeout = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := p.Next("")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no response within 200ms") {
			t.Fatalf("Next = %v, want no response within 200ms", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Next did not return a minute after its 200ms timeout")
	}
	// The stream is gone: a further Next fails at once rather than waiting.
	if _, err := p.Next(""); err == nil {
		t.Fatal("Next on a timed-out stream succeeded")
	}
}
