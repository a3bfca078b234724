package analysis

import (
	"math"
	"testing"
	"time"
)

// served is a scope's figures: n requests, e of them 5xx, each taking ms.
func served(n, e uint64, ms float64) Figures {
	f := Figures{Requests: n, Errors5xx: e}
	f.Duration = durations(n, ms)
	return f
}

// durations is a histogram of n samples of ms each.
func durations(n uint64, ms float64) Histogram {
	var h Histogram
	for i, b := range Bounds {
		if ms <= b {
			h.Counts[i] = n
			return h
		}
	}
	h.Over = n
	return h
}

func proxy(node string, scopes map[string]Figures) Proxy {
	return Proxy{Node: node, Reported: true, Scopes: scopes}
}

func silent(node string) Proxy { return Proxy{Node: node} }

func one(scope string, f Figures) map[string]Figures { return map[string]Figures{scope: f} }

func TestJudge(t *testing.T) {
	const bake = time.Minute
	healthyBase := []Proxy{proxy("base-1", one("http:edge", served(1000, 2, 3))), proxy("base-2", one("http:edge", served(1000, 0, 3)))}
	th := DefaultThresholds
	for _, tc := range []struct {
		name     string
		step     []Proxy
		baseline []Proxy
		elapsed  time.Duration
		silence  time.Duration
		th       *Thresholds
		want     Outcome
		// first is the first finding's proxy, scope and metric, and value
		// and threshold when set.
		first            *Finding
		value, threshold float64
	}{
		{
			name: "healthy step, baked: pass",
			step: []Proxy{proxy("pod-a", one("http:edge", served(200, 0, 3)))}, baseline: healthyBase, elapsed: bake,
			want: Pass,
		},
		{
			name: "healthy step, baking: wait",
			step: []Proxy{proxy("pod-a", one("http:edge", served(200, 0, 3)))}, baseline: healthyBase, elapsed: bake / 2,
			want: Wait, first: &Finding{Metric: ""},
		},
		{
			name: "all 503: abort on the absolute ceiling, during the bake",
			step: []Proxy{proxy("pod-a", one("http:edge", served(200, 200, 3)))}, baseline: healthyBase, elapsed: time.Second,
			want: Abort, first: &Finding{Proxy: "pod-a", Scope: "http:edge", Metric: MetricErrorRatio}, value: 1, threshold: 0.05,
		},
		{
			name: "under the ceiling but above twice the baseline: abort",
			step: []Proxy{proxy("pod-a", one("http:edge", served(1000, 40, 3)))},
			// the baseline's share: 1 %
			baseline: []Proxy{proxy("base-1", one("http:edge", served(1000, 10, 3)))}, elapsed: bake,
			want: Abort, first: &Finding{Proxy: "pod-a", Scope: "http:edge", Metric: MetricErrorRatio}, value: 0.04, threshold: 0.02,
		},
		{
			name:     "baseline without errors: below the floor, no abort",
			step:     []Proxy{proxy("pod-a", one("http:edge", served(1000, 5, 3)))},
			baseline: []Proxy{proxy("base-1", one("http:edge", served(1000, 0, 3)))}, elapsed: bake,
			want: Pass,
		},
		{
			name:     "baseline with too little traffic: only the ceiling applies",
			step:     []Proxy{proxy("pod-a", one("http:edge", served(1000, 40, 3)))},
			baseline: []Proxy{proxy("base-1", one("http:edge", served(10, 0, 3)))}, elapsed: bake,
			want: Pass,
		},
		{
			name: "too little traffic: wait, even after the bake",
			step: []Proxy{proxy("pod-a", one("http:edge", served(49, 49, 3)))}, baseline: healthyBase, elapsed: 10 * bake,
			want: Wait, first: &Finding{Proxy: "pod-a", Metric: MetricRequests}, value: 49, threshold: 50,
		},
		{
			name: "silent during the bake: wait",
			step: []Proxy{silent("pod-a")}, baseline: healthyBase, elapsed: bake - time.Second,
			want: Wait, first: &Finding{Proxy: "pod-a", Metric: MetricReports}, value: 0, threshold: 1,
		},
		{
			name: "silent after the bake: abort",
			step: []Proxy{proxy("pod-a", one("http:edge", served(200, 0, 3))), silent("pod-b")}, baseline: healthyBase, elapsed: bake,
			want: Abort, first: &Finding{Proxy: "pod-b", Metric: MetricReports}, value: 0, threshold: 1,
		},
		{
			name: "silent after a bake shorter than Silence, within it: wait",
			step: []Proxy{silent("pod-a")}, baseline: healthyBase, elapsed: bake + time.Second, silence: 2 * bake,
			want: Wait, first: &Finding{Proxy: "pod-a", Metric: MetricReports}, value: 0, threshold: 1,
		},
		{
			name: "silent after a bake shorter than Silence, past it: abort",
			step: []Proxy{silent("pod-a")}, baseline: healthyBase, elapsed: 2 * bake, silence: 2 * bake,
			want: Abort, first: &Finding{Proxy: "pod-a", Metric: MetricReports}, value: 0, threshold: 1,
		},
		{
			name: "reported, but no request: wait",
			step: []Proxy{proxy("pod-a", nil)}, baseline: healthyBase, elapsed: bake,
			want: Wait, first: &Finding{Proxy: "pod-a", Metric: MetricRequests}, value: 0, threshold: 50,
		},
		{
			name:     "p99 above twice the baseline's",
			step:     []Proxy{proxy("pod-a", one("http:edge", served(200, 0, 900)))},
			baseline: []Proxy{proxy("base-1", one("http:edge", served(1000, 0, 200)))}, elapsed: bake,
			// 900 ms is in the bucket (500, 1000]: 99 % of it is 995; the
			// baseline's 200 ms in (100, 250]: 248.5, twice 497.
			want: Abort, first: &Finding{Proxy: "pod-a", Scope: "http:edge", Metric: MetricP99}, value: 995, threshold: 497,
		},
		{
			name:     "p99 above twice the baseline's, over fewer than 100 requests: the slowest of them, not judged",
			step:     []Proxy{proxy("pod-a", one("http:edge", served(99, 0, 900)))},
			baseline: []Proxy{proxy("base-1", one("http:edge", served(1000, 0, 200)))}, elapsed: bake,
			want: Pass,
		},
		{
			name:     "p99 above twice a baseline's of fewer than 100 requests: not judged",
			step:     []Proxy{proxy("pod-a", one("http:edge", served(200, 0, 900)))},
			baseline: []Proxy{proxy("base-1", one("http:edge", served(99, 0, 200)))}, elapsed: bake,
			want: Pass,
		},
		{
			name: "p99 ceiling",
			step: []Proxy{proxy("pod-a", one("http:edge", served(200, 0, 40)))}, baseline: healthyBase, elapsed: bake,
			th:   &Thresholds{P99: Limit{Max: 30}, MinRequests: 50},
			want: Abort, first: &Finding{Proxy: "pod-a", Scope: "http:edge", Metric: MetricP99}, value: 49.75, threshold: 30,
		},
		{
			name: "resets",
			step: []Proxy{proxy("pod-a", one("cluster:backend", Figures{Requests: 100, Resets: 20}))}, baseline: healthyBase, elapsed: bake,
			want: Abort, first: &Finding{Proxy: "pod-a", Scope: "cluster:backend", Metric: MetricResetRatio}, value: 0.2, threshold: 0.05,
		},
		{
			name: "connect failures",
			step: []Proxy{proxy("pod-a", one("cluster:backend", Figures{Requests: 100, ConnectFailures: 6}))}, baseline: healthyBase, elapsed: bake,
			want: Abort, first: &Finding{Proxy: "pod-a", Scope: "cluster:backend", Metric: MetricConnectFailureRatio}, value: 0.06, threshold: 0.05,
		},
		{
			name: "a scope with little traffic is not judged alone; the proxy's total is enough to pass",
			step: []Proxy{proxy("pod-a", map[string]Figures{"http:edge": served(200, 0, 3), "http:admin": served(3, 3, 3)})}, baseline: healthyBase, elapsed: bake,
			want: Pass,
		},
		{
			name: "one bad proxy among good ones aborts, naming it",
			step: []Proxy{
				proxy("pod-a", one("http:edge", served(200, 0, 3))),
				proxy("pod-c", one("http:edge", served(200, 100, 3))),
				proxy("pod-b", one("http:edge", served(5, 0, 3))),
			},
			baseline: healthyBase, elapsed: time.Second,
			want: Abort, first: &Finding{Proxy: "pod-c", Scope: "http:edge", Metric: MetricErrorRatio}, value: 0.5, threshold: 0.05,
		},
		{
			name:     "no proxy in the step: wait",
			baseline: healthyBase, elapsed: bake,
			want: Wait, first: &Finding{Metric: MetricReports},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Step: tc.step, Baseline: tc.baseline, Elapsed: tc.elapsed, Bake: bake, Silence: tc.silence, Thresholds: th}
			if tc.th != nil {
				in.Thresholds = *tc.th
			}
			v := Judge(in)
			if v.Outcome != tc.want {
				t.Fatalf("outcome %s, want %s; findings %v", v.Outcome, tc.want, v.Findings)
			}
			if tc.first == nil {
				if len(v.Findings) != 0 {
					t.Errorf("findings %v, want none", v.Findings)
				}
				return
			}
			if len(v.Findings) == 0 {
				t.Fatalf("no finding, want one about %s", tc.first.Metric)
			}
			f := v.Findings[0]
			if f.Outcome != tc.want || f.Proxy != tc.first.Proxy || f.Scope != tc.first.Scope || f.Metric != tc.first.Metric {
				t.Errorf("first finding %+v, want %s on %s %s %s", f, tc.want, tc.first.Proxy, tc.first.Scope, tc.first.Metric)
			}
			if tc.first.Metric != "" && (!near(f.Value, tc.value) || !near(f.Threshold, tc.threshold)) {
				t.Errorf("value %g threshold %g, want %g and %g (%s)", f.Value, f.Threshold, tc.value, tc.threshold, f)
			}
			if f.Reason == "" {
				t.Errorf("finding without a reason: %+v", f)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestQuantile(t *testing.T) {
	var h Histogram
	if _, ok := h.Quantile(0.99); ok {
		t.Error("an empty histogram has a quantile")
	}
	// 90 samples in (0, 0.5], 10 in (5, 10]: the 99th is 9/10 into (5, 10].
	h.Counts[0], h.Counts[3] = 90, 10
	if q, ok := h.Quantile(0.99); !ok || !near(q, 9.5) {
		t.Errorf("p99 = %g, %v; want 9.5", q, ok)
	}
	if q, _ := h.Quantile(0.5); !near(q, 0.5*50/90) {
		t.Errorf("p50 = %g", q)
	}
	h.Over = 1000
	if q, _ := h.Quantile(0.99); q != Bounds[NumBuckets-1] {
		t.Errorf("p99 beyond the last bound = %g, want the last bound", q)
	}
}

func TestFiguresWindow(t *testing.T) {
	start := served(100, 1, 3)
	end := start.Add(served(50, 5, 3))
	w := end.Sub(start)
	if w.Requests != 50 || w.Errors5xx != 5 || w.Duration.Count() != 50 {
		t.Errorf("window %+v, want 50 requests, 5 errors, 50 durations", w)
	}
	if z := start.Sub(end); z.Requests != 0 || z.Duration.Count() != 0 {
		t.Errorf("a window that runs backwards is %+v, want nothing", z)
	}
}

// A request counts once in a proxy's total, though its HTTP connection
// manager and its cluster both count it.
func TestTotal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scopes map[string]Figures
		want   Figures
	}{
		{name: "none", want: Figures{}},
		{name: "an HTTP scope and the cluster it sends to: the HTTP scope's, with the cluster's failed connections",
			scopes: map[string]Figures{
				ScopeHTTP("ingress"):  {Requests: 20, Errors5xx: 20},
				ScopeCluster("next"):  {Errors5xx: 20, ConnectFailures: 3},
				ScopeHTTP("admin"):    {Requests: 5},
				ScopeCluster("other"): {Requests: 5, ConnectFailures: 1},
			},
			want: Figures{Requests: 25, Errors5xx: 20, ConnectFailures: 4}},
		{name: "clusters alone (a TCP proxy's): theirs",
			scopes: map[string]Figures{ScopeCluster("a"): {Requests: 7, Resets: 1}, ScopeCluster("b"): {Requests: 3}},
			want:   Figures{Requests: 10, Resets: 1}},
	} {
		if got := Total(tc.scopes); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
