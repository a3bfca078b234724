package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-envoy-controller/kube-envoy-controller/hack/refdocs/internal/recorder"
)

func TestMetricsTable(t *testing.T) {
	cs := []prometheus.Collector{
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "p_b_total", Help: `Counts "things" | others.`}, []string{"fleet", "reason"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "p_a", Help: "A gauge.", ConstLabels: prometheus.Labels{"k": "v"}}),
		prometheus.NewHistogram(prometheus.HistogramOpts{Name: "p_c_seconds", Help: "A histogram."}),
		prometheus.NewSummary(prometheus.SummaryOpts{Name: "p_d", Help: "A summary."}),
		prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "other", Help: "Not listed: another prefix."}, []string{"x"}),
	}
	got, err := metricsTable(cs, "p_")
	if err != nil {
		t.Fatal(err)
	}
	want := "| metric | type | labels | help |\n|---|---|---|---|\n" +
		"| `p_a` | gauge | `k=\"v\"` | A gauge. |\n" +
		"| `p_b_total` | counter | `fleet`, `reason` | Counts \"things\" \\| others. |\n" +
		"| `p_c_seconds` | histogram |  | A histogram. |\n" +
		"| `p_d` | summary |  | A summary. |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := metricsTable(cs, "q_"); err == nil {
		t.Error("no error for a prefix no metric has")
	}
}

// The recorder sees the operator's collectors, registered in the init
// functions of packages that main imports.
func TestRecordedMetrics(t *testing.T) {
	if err := recorder.Check(metricPrefix); err != nil {
		t.Fatal(err)
	}
	got, err := metricsTable(recorder.Collectors(), metricPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `kube_envoy_controller_build_info` | gauge | `version`, `revision`, `go_version` |",
		"| `kube_envoy_controller_xds_connected_proxies` | gauge | `fleet` |",
		"| `kube_envoy_controller_xds_publish_to_ack_seconds` | histogram |  |",
		"| `kube_envoy_controller_xds_refused_total` | counter | `reason` |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the metrics table has no row starting %s:\n%s", want, got)
		}
	}
}

func TestConstLabelsWithCommas(t *testing.T) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "p_x", Help: "h", ConstLabels: prometheus.Labels{"a": "1,2", "b": `q"`}})
	ms, err := describe(g, "p_")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || strings.Join(ms[0].Labels, " ") != `a="1,2" b="q\""` {
		t.Errorf("got %+v", ms)
	}
}
