package stats

import (
	"testing"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// AddSink declares the sink over the fleet bootstrap's own xDS cluster,
// and refuses a cluster the bootstrap lacks or a second stats matcher.
func TestAddSink(t *testing.T) {
	xds := proxy.XDSServer{ClusterName: "xds_cluster", Host: "localhost", Port: 18000, MutualTLS: true}
	b := proxy.Bootstrap(xds, proxy.Overload{})
	if err := AddSink(b, "xds_cluster", 0, Matcher(`^server\.total_connections$`)); err != nil {
		t.Fatal(err)
	}
	if len(b.GetStatsSinks()) != 1 || b.GetStatsSinks()[0].GetName() != SinkName {
		t.Fatalf("sinks %v", b.GetStatsSinks())
	}
	c := &metricsv3.MetricsServiceConfig{}
	if err := b.GetStatsSinks()[0].GetTypedConfig().UnmarshalTo(c); err != nil {
		t.Fatal(err)
	}
	if c.GetGrpcService().GetEnvoyGrpc().GetClusterName() != "xds_cluster" || !c.GetEmitTagsAsLabels() || !c.GetReportCountersAsDeltas().GetValue() ||
		c.GetHistogramEmitMode() != metricsv3.HistogramEmitMode_HISTOGRAM {
		t.Errorf("sink %v", c)
	}
	if b.GetStatsFlushInterval().AsDuration() != DefaultFlushInterval {
		t.Errorf("flush interval %v", b.GetStatsFlushInterval().AsDuration())
	}
	if n := len(b.GetStatsConfig().GetStatsMatcher().GetInclusionList().GetPatterns()); n != len(InclusionPatterns)+1 {
		t.Errorf("%d inclusion patterns, want %d", n, len(InclusionPatterns)+1)
	}
	if err := AddSink(b, "xds_cluster", 0, Matcher()); err == nil {
		t.Error("a second stats matcher was accepted")
	}
	if err := AddSink(proxy.Bootstrap(xds, proxy.Overload{}), "elsewhere", 0, nil); err == nil {
		t.Error("a sink over a cluster the bootstrap lacks was accepted")
	}
}
