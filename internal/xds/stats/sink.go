package stats

import (
	"fmt"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// SinkName is the stats sink's extension name.
const SinkName = proxy.StatsSinkName

// DefaultFlushInterval is how often a proxy sends its figures: a step's
// bake of a minute sees six reports of each proxy.
const DefaultFlushInterval = proxy.StatsFlushInterval

// Sink is the stats sink that streams a proxy's figures to the Receiver at
// the xDS server, over the bootstrap's static cluster xdsCluster (the one
// ADS uses, with the fleet's client certificate): counters as deltas,
// tags as labels (what the Receiver reads), histograms as buckets only.
// It is the one a fleet's bootstrap declares (proxy.StatsSink), built in
// package proxy, which renders bootstraps and links no server.
func Sink(xdsCluster string) *metricsv3.StatsSink { return proxy.StatsSink(xdsCluster) }

// InclusionPatterns are the full stat names of the inclusion list (see
// inclusion.go), as regular expressions over Envoy's stat names.
// A stat prefix or a cluster name with a dot in it is not matched: Envoy's
// tag extraction cuts those at the first dot, so that their figures would
// not come under their name anyway; and so cluster.NAME.external.… and its
// like, which count the same requests again, are not matched either.
var InclusionPatterns = []string{
	`^http\.[^.]+\.downstream_rq_(total|5xx|rx_reset|tx_reset|time)$`,
	`^cluster\.[^.]+\.upstream_(rq_(total|5xx|rx_reset|tx_reset|time)|cx_connect_fail)$`,
	`^server\.uptime$`,
}

// Matcher is a stats matcher that instantiates only the inclusion list's
// stats and those that keep match (full stat names, as regular
// expressions), so that the sink sends only those. Envoy applies it to
// every stat, not to the sink alone: the stats it leaves out exist
// nowhere, neither in the admin interface nor in /stats/prometheus. keep
// must therefore hold every stat the fleet's proxies are read for
// otherwise (the drain's server.total_connections, say).
func Matcher(keep ...string) *metricsv3.StatsMatcher {
	var patterns []*matcherv3.StringMatcher
	for _, p := range append(append([]string(nil), InclusionPatterns...), keep...) {
		patterns = append(patterns, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{
			SafeRegex: &matcherv3.RegexMatcher{Regex: p},
		}})
	}
	return &metricsv3.StatsMatcher{StatsMatcher: &metricsv3.StatsMatcher_InclusionList{
		InclusionList: &matcherv3.ListStringMatcher{Patterns: patterns},
	}}
}

// AddSink declares the stats sink in b: Sink over xdsCluster, flushed every
// interval (DefaultFlushInterval when 0), and, with matcher set, the
// bootstrap's stats matcher (Matcher). It refuses a bootstrap without the
// static cluster, or one that has a stats matcher already.
func AddSink(b *bootstrapv3.Bootstrap, xdsCluster string, interval time.Duration, matcher *metricsv3.StatsMatcher) error {
	found := false
	for _, c := range b.GetStaticResources().GetClusters() {
		found = found || c.GetName() == xdsCluster
	}
	if !found {
		return fmt.Errorf("the bootstrap has no static cluster %q", xdsCluster)
	}
	if interval <= 0 {
		interval = DefaultFlushInterval
	}
	b.StatsSinks = append(b.StatsSinks, Sink(xdsCluster))
	b.StatsFlushInterval = durationpb.New(interval)
	if matcher != nil {
		if b.GetStatsConfig().GetStatsMatcher() != nil {
			return fmt.Errorf("the bootstrap has a stats matcher already")
		}
		if b.StatsConfig == nil {
			b.StatsConfig = &metricsv3.StatsConfig{}
		}
		b.StatsConfig.StatsMatcher = matcher
	}
	return b.ValidateAll()
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("packing %T: %v", m, err))
	}
	return a
}
