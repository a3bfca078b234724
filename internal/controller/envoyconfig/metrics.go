package envoyconfig

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// The figures of the rollout step under way that the leader judges by its
// proxies' stats (spec.configRollout.analysis), on the manager's /metrics:
// by fleet, for the step's proxies (proxies="step") and for the baseline,
// the proxies still on the previous revision (proxies="baseline"), in the
// scopes the change touched. Only the leader exports them, while a step
// is judged; a fleet's series go once no step of it is.
var (
	metricStepRequests = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kube_envoy_controller_rollout_step_requests",
		Help: "Requests served in the window of the rollout step under way, in the scopes its change touched, by fleet and proxies (step: the step's proxies; baseline: those on the previous revision). Exported by the leader while it judges a step (spec.configRollout.analysis).",
	}, []string{"fleet", "proxies"})
	metricStep5xxRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kube_envoy_controller_rollout_step_5xx_ratio",
		Help: "Share (0 to 1) of the responses with a 5xx status in the window of the rollout step under way, by fleet and proxies (step, baseline).",
	}, []string{"fleet", "proxies"})
	metricStepResetRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kube_envoy_controller_rollout_step_reset_ratio",
		Help: "Resets per request in the window of the rollout step under way, by fleet and proxies (step, baseline).",
	}, []string{"fleet", "proxies"})
	metricStepConnectFailureRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kube_envoy_controller_rollout_step_connect_failure_ratio",
		Help: "Failed upstream connections per request in the window of the rollout step under way, by fleet and proxies (step, baseline).",
	}, []string{"fleet", "proxies"})
	metricStepP99 = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kube_envoy_controller_rollout_step_p99_seconds",
		Help: "99th percentile of the requests' duration in the window of the rollout step under way, by fleet and proxies (step, baseline); 0 without requests.",
	}, []string{"fleet", "proxies"})
	stepMetrics = []*prometheus.GaugeVec{metricStepRequests, metricStep5xxRatio, metricStepResetRatio, metricStepConnectFailureRatio, metricStepP99}
)

func init() {
	for _, m := range stepMetrics {
		ctrlmetrics.Registry.MustRegister(m)
	}
}

// exportStep exports the figures of fleet's step under way as d judged it,
// or takes its series away when d judged no step that goes on being judged.
func exportStep(fleet string, d publish.RolloutDecision) {
	if d.Judged == nil || d.Action != publish.RolloutWaits {
		for _, m := range stepMetrics {
			m.DeletePartialMatch(prometheus.Labels{"fleet": fleet})
		}
		return
	}
	for proxies, f := range map[string]publish.StepFigures{"step": d.Judged.Proxies, "baseline": d.Judged.Baseline} {
		metricStepRequests.WithLabelValues(fleet, proxies).Set(float64(f.Requests))
		metricStep5xxRatio.WithLabelValues(fleet, proxies).Set(f.ErrorRatio)
		metricStepResetRatio.WithLabelValues(fleet, proxies).Set(f.ResetRatio)
		metricStepConnectFailureRatio.WithLabelValues(fleet, proxies).Set(f.ConnectFailureRatio)
		metricStepP99.WithLabelValues(fleet, proxies).Set(f.P99 / 1000)
	}
}
