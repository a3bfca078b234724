package stats

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The Receiver's metrics, on the manager's /metrics. None is labelled by
// fleet: what a refused client claims is not a fleet, and a proxy's
// figures are read through the rollout, not here.
var (
	metricStreams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kube_envoy_controller_stats_streams",
		Help: "Stats streams open to this replica's receiver of the proxies' stats (Envoy's metrics service).",
	})
	metricProxies = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kube_envoy_controller_stats_proxies",
		Help: "Proxies whose stats this replica's receiver keeps.",
	})
	metricRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kube_envoy_controller_stats_refused_total",
		Help: "Stats streams the receiver refused or ended, by reason: certificate, identity, streams, proxies, fleet_proxies, replaced.",
	}, []string{"reason"})
	metricDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kube_envoy_controller_stats_dropped_metrics_total",
		Help: "Metrics the receiver dropped from the proxies' stats: off its inclusion list, malformed, or past the scopes kept per proxy.",
	})
	metricForgotten = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kube_envoy_controller_stats_forgotten_proxies_total",
		Help: "Proxies whose stats the receiver forgot, by reason: evicted (for a new proxy of their fleet), silent (without a stream for the grace period), left (told so).",
	}, []string{"reason"})
)

// Why a proxy's record is forgotten, as metricForgotten counts it.
const (
	forgottenEvicted = "evicted"
	forgottenSilent  = "silent"
	forgottenLeft    = "left"
)

func init() {
	ctrlmetrics.Registry.MustRegister(metricStreams, metricProxies, metricRefused, metricDropped, metricForgotten)
}
