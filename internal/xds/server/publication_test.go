package server

import (
	"context"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr/funcr"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// A publication is one step: a report taken while SetFleet runs pairs each
// fleet's version with the counts of that same publication, before it or
// after it. The report is taken from SetFleet's log of an inconsistent
// snapshot, the one place where a test runs code inside SetFleet.
//
// The fleet's proxy asks for clusters only, and accepted v1's; v2 has the
// same clusters and an endpoint no cluster names (the inconsistency that
// is logged), so the proxy stands accepted with either version. A report
// that paired v2 with the tracker's record of v1 would count it pending.
func TestReportNeverSeesHalfAPublication(t *testing.T) {
	var s *Server
	var during []report.Report
	s = New("127.0.0.1:0", funcr.New(func(_, _ string) {
		during = append(during, s.ProxyReport())
	}, funcr.Options{Verbosity: 1}))

	mustPublish(t, s, "v1", clusters("a"))
	ctx := context.Background()
	cds := resourcev3.ClusterType
	_ = s.tracker.OnStreamOpen(ctx, 1, "")
	_ = s.tracker.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "pod-1", Cluster: fleet}, TypeUrl: cds})
	s.tracker.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: cds, VersionInfo: s.TypeVersion(fleet, cds), Nonce: "1"})
	_ = s.tracker.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: cds, VersionInfo: s.TypeVersion(fleet, cds), ResponseNonce: "1"})
	want := report.FleetProxies{Version: "v1", Connected: 1, Acked: 1}
	if got := s.ProxyReport()[fleet]; !got.Equal(want) {
		t.Fatalf("before: %+v, want %+v", got, want)
	}

	v2 := clusters("a")
	v2[resourcev3.EndpointType] = append(v2[resourcev3.EndpointType], &endpointv3.ClusterLoadAssignment{ClusterName: "nobody"})
	mustPublish(t, s, "v2", v2)
	if len(during) == 0 {
		t.Fatal("SetFleet logged no inconsistent snapshot: the test took no report")
	}
	for _, r := range during {
		if got := r[fleet]; got.Acked != 1 || (got.Version != "v1" && got.Version != "v2") {
			t.Errorf("a report during the publication of v2: %+v, want v1 or v2 with its proxy accepted", got)
		}
	}
	want.Version = "v2"
	if got := s.ProxyReport()[fleet]; !got.Equal(want) {
		t.Errorf("after: %+v, want %+v", got, want)
	}
}
