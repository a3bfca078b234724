package envoyjudge

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The Judge's metrics, on the manager's /metrics.
var (
	metricAvailable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kube_envoy_controller_envoy_validation_available",
		Help: "1 when the operator has a real Envoy (--envoy-path) to load EnvoyConfigs in, at admission and before a revision is recorded; 0 when it has none, and admits and serves content no Envoy loaded (it says so in admission warnings and in the Accepted condition).",
	})
	metricValidations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kube_envoy_controller_envoy_validations_total",
		Help: "EnvoyConfig contents judged by a real Envoy, by result: loaded, refused, timeout (refused too), unjudged (no Envoy, or it could not run). Verdicts taken from the cache are counted in kube_envoy_controller_envoy_validation_cache_hits_total instead.",
	}, []string{"result"})
	metricCacheHits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kube_envoy_controller_envoy_validation_cache_hits_total",
		Help: "EnvoyConfig contents whose verdict was Envoy's earlier one for the same content, so that Envoy did not run.",
	})
	metricDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kube_envoy_controller_envoy_validation_duration_seconds",
		Help:    "Time a real Envoy took to load an EnvoyConfig's content (envoy --mode validate), without the wait for a turn.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(metricAvailable, metricValidations, metricCacheHits, metricDuration)
}
