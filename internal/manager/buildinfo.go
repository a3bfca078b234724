package manager

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/version"
)

// buildInfo is the conventional *_build_info gauge: always 1, the build in its
// labels, so that a dashboard can tell which version each replica runs.
var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "kube_envoy_controller_build_info",
	Help: "The running operator's build: version (git describe), revision (commit) and Go version. Always 1.",
}, []string{"version", "revision", "go_version"})

func init() {
	buildInfo.WithLabelValues(version.Version(), version.Revision(), runtime.Version()).Set(1)
	ctrlmetrics.Registry.MustRegister(buildInfo)
}
