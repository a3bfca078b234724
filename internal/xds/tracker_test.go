package xds

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
)

// Proxies reports each proxy of a published fleet: when its stream opened
// and last asked, and per type the last version sent, the one acked and
// the last NACK, which an ACK clears.
func TestTrackerProxies(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := NewTracker(nil)
	tr.now = func() time.Time { return clock }
	ctx := context.Background()
	tr.Published("ns/edge", "v1", nil)
	node := &corev3.Node{Id: "edge-1", Cluster: "ns/edge"}
	lds, cds := resourcev3.ListenerType, resourcev3.ClusterType

	_ = tr.OnStreamOpen(ctx, 1, "")
	_ = tr.OnStreamOpen(ctx, 2, "") // another fleet's, not published: not reported
	_ = tr.OnStreamRequest(2, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "x", Cluster: "ns/ghost"}, TypeUrl: lds})
	opened := clock
	clock = clock.Add(time.Second)
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: lds})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: cds})
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: lds, VersionInfo: "l1", Nonce: "1"})
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: cds, VersionInfo: "c1", Nonce: "2"})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: lds, VersionInfo: "l1", ResponseNonce: "1"})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: cds, ResponseNonce: "2", ErrorDetail: &statuspb.Status{Message: "no"}})
	clock = clock.Add(time.Second)
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: lds, VersionInfo: "l2", Nonce: "3"})

	want := []ProxyState{{Node: "edge-1", Fleet: "ns/edge", Since: opened, LastSeen: opened.Add(time.Second), Types: map[string]TypeState{
		lds: {Sent: "l2", Acked: "l1"},
		cds: {Sent: "c1", NACK: &NACK{Version: "c1", Detail: "no"}},
	}}}
	if got := tr.Proxies(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Proxies =\n%+v\nwant\n%+v", got, want)
	}

	// An ACK clears the NACK; a closed stream is gone.
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: cds, VersionInfo: "c2", Nonce: "4"})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: cds, VersionInfo: "c2", ResponseNonce: "4"})
	if got := tr.Proxies()[0].Types[cds]; !reflect.DeepEqual(got, TypeState{Sent: "c2", Acked: "c2"}) {
		t.Errorf("after the ACK, clusters = %+v", got)
	}
	tr.OnStreamClosed(1, node)
	if got := tr.Proxies(); len(got) != 0 {
		t.Errorf("after the stream closed: %+v", got)
	}
}
