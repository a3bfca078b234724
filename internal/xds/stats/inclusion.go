package stats

import (
	"math"

	prom "github.com/prometheus/client_model/go"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
)

// The inclusion list: the metrics a Receiver keeps, by the names Envoy
// sends with emit_tags_as_labels (the tag-extracted name; the listener's
// stat prefix, the cluster and the response code class as labels), and
// the full stat names they come from (Sink's matcher). Counters are
// deltas (report_counters_as_deltas); histograms carry the flush
// interval's samples in Envoy's default buckets (analysis.Bounds).
//
//	http.downstream_rq_total       http.PREFIX.downstream_rq_total        requests
//	http.downstream_rq_xx          http.PREFIX.downstream_rq_5xx          5xx responses (class 5 only)
//	http.downstream_rq_rx_reset    http.PREFIX.downstream_rq_rx_reset     resets
//	http.downstream_rq_tx_reset    http.PREFIX.downstream_rq_tx_reset     resets
//	http.downstream_rq_time        http.PREFIX.downstream_rq_time         request duration (ms)
//	cluster.upstream_rq_total      cluster.NAME.upstream_rq_total         requests
//	cluster.upstream_rq_xx         cluster.NAME.upstream_rq_5xx           5xx responses (class 5 only)
//	cluster.upstream_rq_rx_reset   cluster.NAME.upstream_rq_rx_reset      resets
//	cluster.upstream_rq_tx_reset   cluster.NAME.upstream_rq_tx_reset      resets
//	cluster.upstream_cx_connect_fail cluster.NAME.upstream_cx_connect_fail failed connections
//	cluster.upstream_rq_time       cluster.NAME.upstream_rq_time          request duration (ms)
//	server.uptime                  server.uptime                          heartbeat: a gauge set at every flush
//
// Envoy sends a counter or a histogram only once it was used, so a proxy
// without traffic sends none of them: the heartbeat tells it from a
// silent one.

// Tag names of the labels Envoy sends.
const (
	labelPrefix    = "envoy.http_conn_manager_prefix"
	labelCluster   = "envoy.cluster_name"
	labelCodeClass = "envoy.response_code_class"
)

// field is what a kept metric adds to a scope's figures.
type field int

const (
	fieldRequests field = iota
	fieldErrors
	fieldResets
	fieldConnectFailures
	fieldDuration
	fieldHeartbeat
)

// kept is one metric of the inclusion list: its kind and what it adds to.
type kept struct {
	scope string // the label that names its scope; "" for the heartbeat
	typ   prom.MetricType
	field field
}

var inclusion = map[string]kept{
	"http.downstream_rq_total":         {labelPrefix, prom.MetricType_COUNTER, fieldRequests},
	"http.downstream_rq_xx":            {labelPrefix, prom.MetricType_COUNTER, fieldErrors},
	"http.downstream_rq_rx_reset":      {labelPrefix, prom.MetricType_COUNTER, fieldResets},
	"http.downstream_rq_tx_reset":      {labelPrefix, prom.MetricType_COUNTER, fieldResets},
	"http.downstream_rq_time":          {labelPrefix, prom.MetricType_HISTOGRAM, fieldDuration},
	"cluster.upstream_rq_total":        {labelCluster, prom.MetricType_COUNTER, fieldRequests},
	"cluster.upstream_rq_xx":           {labelCluster, prom.MetricType_COUNTER, fieldErrors},
	"cluster.upstream_rq_rx_reset":     {labelCluster, prom.MetricType_COUNTER, fieldResets},
	"cluster.upstream_rq_tx_reset":     {labelCluster, prom.MetricType_COUNTER, fieldResets},
	"cluster.upstream_cx_connect_fail": {labelCluster, prom.MetricType_COUNTER, fieldConnectFailures},
	"cluster.upstream_rq_time":         {labelCluster, prom.MetricType_HISTOGRAM, fieldDuration},
	"server.uptime":                    {"", prom.MetricType_GAUGE, fieldHeartbeat},
}

// sample is one metric, parsed: the scope it counts in and what it adds.
type sample struct {
	scope     string
	figures   analysis.Figures
	heartbeat bool
}

// parse reads one metric of family name, or reports that it is not kept:
// off the inclusion list, of another type, with other labels than its
// own, of another response class than 5xx, or malformed.
func parse(name string, typ prom.MetricType, m *prom.Metric) (sample, bool) {
	k, ok := inclusion[name]
	if !ok || k.typ != typ {
		return sample{}, false
	}
	if k.field == fieldHeartbeat {
		return sample{heartbeat: true}, len(m.GetLabel()) == 0
	}
	var scope, class string
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case k.scope:
			scope = l.GetValue()
		case labelCodeClass:
			class = l.GetValue()
		default:
			return sample{}, false
		}
	}
	if scope == "" || len(scope) > maxScopeName {
		return sample{}, false
	}
	if (k.field == fieldErrors) != (class != "") || k.field == fieldErrors && class != "5" {
		return sample{}, false
	}
	s := sample{scope: analysis.ScopeHTTP(scope)}
	if k.scope == labelCluster {
		s.scope = analysis.ScopeCluster(scope)
	}
	if k.field == fieldDuration {
		h, ok := histogram(m.GetHistogram())
		s.figures.Duration = h
		return s, ok
	}
	v, ok := count(m.GetCounter().GetValue())
	if !ok {
		return sample{}, false
	}
	switch k.field {
	case fieldRequests:
		s.figures.Requests = v
	case fieldErrors:
		s.figures.Errors5xx = v
	case fieldResets:
		s.figures.Resets = v
	case fieldConnectFailures:
		s.figures.ConnectFailures = v
	}
	return s, true
}

// maxCount bounds a counter's delta, or a histogram's samples, in one
// flush: more than any proxy serves in one, and far from overflowing a
// running total.
const maxCount = 1 << 40

// count reads a counter's delta: a whole number, at most maxCount.
func count(v float64) (uint64, bool) {
	if v < 0 || v > maxCount || v != math.Trunc(v) {
		return 0, false
	}
	return uint64(v), true
}

// histogram reads a flush interval's histogram, which must be in Envoy's
// default buckets, cumulative as Prometheus counts them.
func histogram(h *prom.Histogram) (analysis.Histogram, bool) {
	var out analysis.Histogram
	buckets := h.GetBucket()
	if len(buckets) != analysis.NumBuckets {
		return out, false
	}
	total, ok := count(float64(h.GetSampleCount()))
	if !ok {
		return out, false
	}
	var below uint64
	for i, b := range buckets {
		c := b.GetCumulativeCount()
		if b.GetUpperBound() != analysis.Bounds[i] || c < below || c > total {
			return analysis.Histogram{}, false
		}
		out.Counts[i] = c - below
		below = c
	}
	out.Over = total - below
	return out, true
}
