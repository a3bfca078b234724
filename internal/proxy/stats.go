package proxy

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The stats sink of a fleet whose rollout is judged by its proxies' own
// stats (docs/concepts/config-lifecycle.md): a fleet of the built-in xDS
// server with spec.configRollout. The receiver, internal/xds/stats, keeps a
// small fixed inclusion list of what the sink sends and drops the rest.
//
// The bootstrap declares no stats matcher (stats_config.stats_matcher).
// Envoy cannot filter per sink: a matcher decides which stats exist at all,
// so it would also empty the admin interface and the /stats/prometheus that
// the fleet's pods expose on ReadyPort, which users scrape, and lose the
// drain script's server.total_connections (DrainHook). The sink thus sends
// every stat Envoy has used, and the price is the size of a flush: measured
// with a real Envoy of a fleet's bootstrap with one listener and one
// cluster, about 18 KB (179 metric families) against 1.6 KB (10 families)
// with the matcher. Flushed every StatsFlushInterval, 1000 such proxies
// send the operator about 1.8 MB/s; a flush grows with the listeners and
// clusters a proxy has used. The first message of a stream also carries
// the node and Envoy's extensions, about 79 KB in all: Envoy sends it once
// per stream, and opens a stream again at the next flush after the server
// ends one, so a server that does not serve the metrics service receives
// it at every flush.
const (
	// StatsSinkName is the stats sink's extension name.
	StatsSinkName = "envoy.stat_sinks.metrics_service"
	// StatsFlushInterval is how often a proxy sends its stats: a step's
	// default bake of a minute sees six reports of each proxy.
	StatsFlushInterval = 10 * time.Second
)

// StatsSink is the stats sink that streams a proxy's stats to the metrics
// service of the xDS server, over the bootstrap's static cluster
// xdsCluster (the one ADS uses, with the fleet's client certificate, on
// the same connection): counters as deltas, tags as labels and histograms
// as buckets only, which is what the receiver reads.
func StatsSink(xdsCluster string) *metricsv3.StatsSink {
	return &metricsv3.StatsSink{
		Name: StatsSinkName,
		ConfigType: &metricsv3.StatsSink_TypedConfig{TypedConfig: mustAny(&metricsv3.MetricsServiceConfig{
			TransportApiVersion: corev3.ApiVersion_V3,
			GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: xdsCluster},
			}},
			ReportCountersAsDeltas: wrapperspb.Bool(true),
			EmitTagsAsLabels:       true,
			HistogramEmitMode:      metricsv3.HistogramEmitMode_HISTOGRAM,
		})},
	}
}
