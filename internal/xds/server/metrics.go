package server

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/cache"
)

// The xDS server's metrics, on the manager's /metrics.
var (
	metricConnected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kube_envoy_controller_xds_connected_proxies",
		Help: "Proxies connected to this replica's xDS server, by fleet (namespace/envoy).",
	}, []string{"fleet"})
	metricPushes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kube_envoy_controller_xds_pushes_total",
		Help: "New configuration versions published, by fleet.",
	}, []string{"fleet"})
	metricAcks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kube_envoy_controller_xds_acks_total",
		Help: "Responses accepted by proxies (ACK), by fleet.",
	}, []string{"fleet"})
	metricNacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kube_envoy_controller_xds_nacks_total",
		Help: "Responses rejected by proxies (NACK), by fleet.",
	}, []string{"fleet"})
	// metricRefused has no fleet label: what a refused client claims is not
	// a fleet, and must not make a series.
	metricRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kube_envoy_controller_xds_refused_total",
		Help: "Streams and connections the xDS server refused, by reason: unknown_type, wildcard_secret, names, identity (streams); handshake, connection_limit, source_connections, source_handshakes (connections).",
	}, []string{"reason"})
	// metricUnserved is labelled by a fixed table of types (unservedLabel):
	// a type URL is what the client names.
	metricUnserved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kube_envoy_controller_xds_unserved_subscriptions_total",
		Help: "Subscriptions, one per stream and type, to a type the xDS server does not serve, left unanswered while the stream's other subscriptions go on, by type: extension_config, scoped_route, virtual_host, runtime, lb_endpoint, other.",
	}, []string{"type"})
	metricPublishToAck = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kube_envoy_controller_xds_publish_to_ack_seconds",
		Help:    "Time from publishing a fleet's new configuration to its acceptance by every connected proxy of the fleet.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	// metricPushStage is labelled by a fixed table of stages (Stage).
	metricPushStage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kube_envoy_controller_xds_push_stage_seconds",
		Help:    "Wall time of each stage of a push of a fleet's new revision, by stage: queue (from the informer's event of an EnvoyConfig's write to the start of the reconcile it queued), read, translate, judge (a real Envoy's load), reports, record (the history's write), serve (to this replica's xDS server), status (the stages of the leader's reconcile that records the revision), fanout (from the publication's start to the last response of the revision handed to a proxy's stream, observed once every connected proxy of the fleet accepted it).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"stage"})
)

// The reasons of metricRefused.
const (
	// refusedType: more types the server does not serve than a stream may
	// ask for (maxUnservedTypes).
	refusedType = "unknown_type"
	// refusedWildcardSecret and refusedNames are the cache's: a wildcard
	// subscription to secrets, and more resource names than a stream may
	// subscribe to.
	refusedWildcardSecret = cache.RefusedWildcardSecret
	refusedNames          = cache.RefusedNames
	// refusedHandshake: a TLS handshake that failed or timed out.
	refusedHandshake = "handshake"
	// refusedConnection: a connection beyond MaxConnections, once set up.
	refusedConnection = "connection_limit"
	// refusedSourceConnections and refusedSourceHandshakes: a connection
	// beyond its source's limits, as soon as it is accepted.
	refusedSourceConnections = "source_connections"
	refusedSourceHandshakes  = "source_handshakes"
	// refusedIdentity: no verified fleet certificate, a node of another
	// fleet, or a node that changed on its stream.
	refusedIdentity = "identity"
)

// countRefused counts a refusal, by reason.
func countRefused(reason string) { metricRefused.WithLabelValues(reason).Inc() }

func init() {
	ctrlmetrics.Registry.MustRegister(metricConnected, metricPushes, metricAcks, metricNacks, metricPublishToAck, metricPushStage, metricRefused, metricUnserved)
}
