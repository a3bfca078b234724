package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The Grafana dashboard in config/grafana may only query metrics that this
// binary registers: these tests fail when a metric is renamed or dropped.

const dashboardFile = "../../config/grafana/kube-envoy-controller.json"

// dashboard is the part of Grafana's dashboard model that holds queries.
type dashboard struct {
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type dashboardPanel struct {
	ID         int              `json:"id"`
	Type       string           `json:"type"`
	Title      string           `json:"title"`
	Datasource *json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// queries returns every PromQL expression of the dashboard, by where it is.
func (d dashboard) queries() map[string]string {
	out := map[string]string{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for i, tg := range p.Targets {
				out[p.Title+"/"+string(rune('A'+i))] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out["variable "+v.Name] = v.Definition
		}
	}
	return out
}

var (
	promString     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promBraces     = regexp.MustCompile(`\{[^{}]*\}`)
	promBrackets   = regexp.MustCompile(`\[[^\[\]]*\]`)
	promGrouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promNumber     = regexp.MustCompile(`\b[0-9][A-Za-z0-9_.]*`) // numbers and durations: 0.99, 5m, 1h30m
	promIdentifier = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*\s*\(?`)
	promKeywords   = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "inf", "nan"}
)

// metricNames returns the metric names that a PromQL expression (or a Grafana
// label_values() variable query) selects: its identifiers, once strings,
// label matchers, ranges, groupings and numbers are removed, that do not call
// a function and are not keywords.
func metricNames(expr string) []string {
	s := promString.ReplaceAllString(expr, `""`)
	s = promBraces.ReplaceAllString(s, " ")
	s = promBrackets.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	s = promNumber.ReplaceAllString(s, " ")
	var out []string
	for _, m := range promIdentifier.FindAllString(s, -1) {
		if strings.HasSuffix(m, "(") {
			continue // a function or aggregation
		}
		m = strings.TrimSpace(m)
		if slices.Contains(promKeywords, strings.ToLower(m)) || slices.Contains(out, m) {
			continue
		}
		out = append(out, m)
	}
	// label_values(metric, label): the label is no metric.
	if strings.HasPrefix(strings.TrimSpace(expr), "label_values(") && len(out) == 2 {
		out = out[:1]
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sum(kube_envoy_controller_xds_connected_proxies{fleet=~"$fleet"})`, []string{"kube_envoy_controller_xds_connected_proxies"}},
		{`histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket[$__rate_interval])))`, []string{"a_seconds_bucket"}},
		{`sum by (controller, result) (rate(x_total{controller=~"a|b", result!="success"}[5m]))`, []string{"x_total"}},
		{`sum without (instance) (a) / ignoring (le) group_left b offset 5m`, []string{"a", "b"}},
		{`rate(a_total[5m]) > bool 0 and on (fleet) b`, []string{"a_total", "b"}},
		{`label_values(controller_runtime_reconcile_total, controller)`, []string{"controller_runtime_reconcile_total"}},
		{`sum(rate(x{le="+Inf", name="by (y)"}[1m]))`, []string{"x"}},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// registered reports whether controller-runtime's registry, which the manager
// serves on /metrics, holds a metric of that name. The registry cannot list
// what it holds, and Gather leaves out vectors without children; but it
// refuses a second descriptor of a name it already has.
func registered(t *testing.T, name string) bool {
	t.Helper()
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
	err := ctrlmetrics.Registry.Register(probe)
	if err == nil {
		ctrlmetrics.Registry.Unregister(probe)
		return false
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) || strings.Contains(err.Error(), "already exists with the same fully-qualified name") ||
		strings.Contains(err.Error(), "previously registered descriptor with the same fully-qualified name") {
		return true
	}
	t.Fatalf("probing metric %q: %v", name, err)
	return false
}

// registeredSeries is registered for a series name, which for a histogram
// is the histogram's name with _bucket, _sum or _count.
func registeredSeries(t *testing.T, name string) bool {
	t.Helper()
	if registered(t, name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered(t, base) {
			return true
		}
	}
	return false
}

func TestDashboardQueriesRegisteredMetrics(t *testing.T) {
	if !registered(t, "kube_envoy_controller_xds_pushes_total") || registered(t, "kube_envoy_controller_no_such_metric") {
		t.Fatal("the registry probe does not tell registered metrics from others")
	}
	queried := map[string]bool{}
	for where, expr := range readDashboard(t).queries() {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", where, expr)
		}
		for _, n := range names {
			queried[n] = true
			if !registeredSeries(t, n) {
				t.Errorf("%s: %q queries %s, which the operator does not register", where, expr, n)
			}
		}
	}
	// What the dashboard is for.
	for _, want := range []string{
		"kube_envoy_controller_xds_connected_proxies",
		"kube_envoy_controller_xds_publish_to_ack_seconds_bucket",
		"kube_envoy_controller_xds_nacks_total",
		"kube_envoy_controller_xds_pushes_total",
		"controller_runtime_reconcile_total",
		"controller_runtime_reconcile_errors_total",
		"workqueue_depth",
	} {
		if !queried[want] {
			t.Errorf("the dashboard does not query %s", want)
		}
	}
}

func TestDashboardPanels(t *testing.T) {
	d := readDashboard(t)
	ids := map[int]string{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if other, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type != "row" {
				// Every panel follows the dashboard's data source variable,
				// so that the dashboard imports into any Grafana.
				if p.Datasource == nil || !strings.Contains(string(*p.Datasource), `"${datasource}"`) {
					t.Errorf("panel %q: data source %s, want the ${datasource} variable", p.Title, ptrString(p.Datasource))
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
}

func ptrString(r *json.RawMessage) string {
	if r == nil {
		return "none"
	}
	return string(*r)
}
