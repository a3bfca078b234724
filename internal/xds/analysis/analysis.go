// Package analysis judges a rollout's step by what its proxies served: the
// step's proxies' figures against those of the proxies still on the
// previous revision (the baseline), over the step's window, against a
// fleet's thresholds. It is pure: figures, thresholds and the time elapsed
// go in, a verdict comes out, so that any replica that is given the same
// figures decides the same. The figures come from the proxies themselves
// (internal/xds/stats receives them over Envoy's metrics service); which
// scopes a change touched, and when its step began, the caller says.
//
// The rules, in the order they are applied to each proxy of the step:
//
//  1. A proxy that reported nothing in the window cannot pass: the step
//     waits for it while it bakes, and aborts once the bake is over and
//     it is still silent (metric "reports", value 0), but never before
//     Silence: a proxy's window begins at its first report after it
//     accepted the change, so a short bake must not take a proxy that has
//     not had its first report yet for a silent one.
//  2. Each of its scopes with at least MinRequests requests is judged,
//     metric by metric, against the absolute ceiling and against the
//     baseline's figures of the same scope: above either, the step aborts.
//     The comparison with the baseline is made only where the baseline
//     served at least MinRequests requests in that scope, and only above
//     the limit's floor, so that a baseline without errors does not turn
//     one error into an abort. A p99 is judged only over at least
//     MinSamplesP99 requests, on each side.
//  3. A proxy whose judged scopes served fewer than MinRequests requests in
//     all has too little traffic: the step waits. Too little traffic never
//     aborts a step, and never passes it; how long a step may wait is the
//     caller's to bound.
//  4. Otherwise the proxy passes once the bake is over; until then the
//     step waits.
//
// An abort on any proxy aborts the step at once, even during the bake;
// the step passes only when every one of its proxies passes.
package analysis

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Bounds are the upper bounds, in milliseconds, of the buckets of a
// request-duration histogram: Envoy's default histogram buckets, which its
// metrics service sends.
var Bounds = [...]float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}

// NumBuckets is the number of buckets of a Histogram with a finite bound.
const NumBuckets = len(Bounds)

// Histogram counts samples by bucket: Counts[i] those above Bounds[i-1]
// and at most Bounds[i], Over those above the last bound. Its size is
// fixed.
type Histogram struct {
	Counts [NumBuckets]uint64 `json:"counts"`
	Over   uint64             `json:"over,omitempty"`
}

// Count is the number of samples.
func (h Histogram) Count() uint64 {
	n := h.Over
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Add returns the sum of h and g, bucket by bucket.
func (h Histogram) Add(g Histogram) Histogram {
	for i := range h.Counts {
		h.Counts[i] += g.Counts[i]
	}
	h.Over += g.Over
	return h
}

// Sub returns h less g, bucket by bucket, never below zero: what was
// added to a running total since g was taken of it.
func (h Histogram) Sub(g Histogram) Histogram {
	for i := range h.Counts {
		h.Counts[i] = sub(h.Counts[i], g.Counts[i])
	}
	h.Over = sub(h.Over, g.Over)
	return h
}

// Quantile returns the q-quantile (0 < q ≤ 1) of the samples, in
// milliseconds, interpolated linearly within its bucket, and false when
// there is no sample. A quantile above the last bound is the last bound.
func (h Histogram) Quantile(q float64) (float64, bool) {
	total := h.Count()
	if total == 0 {
		return 0, false
	}
	rank := q * float64(total)
	var below uint64
	for i, c := range h.Counts {
		if c > 0 && float64(below+c) >= rank {
			lower := 0.0
			if i > 0 {
				lower = Bounds[i-1]
			}
			return lower + (Bounds[i]-lower)*(rank-float64(below))/float64(c), true
		}
		below += c
	}
	return Bounds[NumBuckets-1], true
}

// Figures are what a proxy served in one scope, or a sum of them:
// requests, the responses with a 5xx status among them, resets, failed
// upstream connections, and the distribution of request durations.
type Figures struct {
	Requests        uint64    `json:"requests,omitempty"`
	Errors5xx       uint64    `json:"5xx,omitempty"`
	Resets          uint64    `json:"resets,omitempty"`
	ConnectFailures uint64    `json:"connectFailures,omitempty"`
	Duration        Histogram `json:"duration"`
}

// Add returns the sum of f and g.
func (f Figures) Add(g Figures) Figures {
	return Figures{
		Requests: f.Requests + g.Requests, Errors5xx: f.Errors5xx + g.Errors5xx,
		Resets: f.Resets + g.Resets, ConnectFailures: f.ConnectFailures + g.ConnectFailures,
		Duration: f.Duration.Add(g.Duration),
	}
}

// Sub returns f less g, never below zero: the figures of a window, from
// the running totals at its end and at its start.
func (f Figures) Sub(g Figures) Figures {
	return Figures{
		Requests: sub(f.Requests, g.Requests), Errors5xx: sub(f.Errors5xx, g.Errors5xx),
		Resets: sub(f.Resets, g.Resets), ConnectFailures: sub(f.ConnectFailures, g.ConnectFailures),
		Duration: f.Duration.Sub(g.Duration),
	}
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Proxy is one proxy's figures over the window, by scope (the scopes the
// step judges: those the change touched).
type Proxy struct {
	// Node is the proxy's node id.
	Node string
	// Reported is set when the proxy reported in the window, whatever it
	// reported: a proxy that did not is silent.
	Reported bool
	// Scopes are its figures by scope.
	Scopes map[string]Figures
}

// Limit bounds one metric of a step's proxy: at most Max, and at most
// ToBaseline times the baseline's value where that value is above Floor.
// A zero Max or ToBaseline sets no bound.
type Limit struct {
	Max        float64
	ToBaseline float64
	Floor      float64
}

// Thresholds are what a step's proxies are held to.
type Thresholds struct {
	// ErrorRatio bounds the share of responses with a 5xx status.
	ErrorRatio Limit
	// ResetRatio bounds resets per request.
	ResetRatio Limit
	// ConnectFailureRatio bounds failed upstream connections per request.
	ConnectFailureRatio Limit
	// P99 bounds the 99th percentile of request duration, in milliseconds.
	P99 Limit
	// MinRequests is the number of requests below which a proxy's scope is
	// not judged, and a proxy has too little traffic to pass.
	MinRequests uint64
}

// MinSamplesP99 is the number of requests below which a scope's p99 is
// not judged, against the ceiling or the baseline: the 99th percentile of
// fewer is the slowest of them.
const MinSamplesP99 = 100

// DefaultThresholds are the thresholds of a fleet that sets none: at most
// 5 % of 5xx responses, of resets and of failed connections, and twice the
// baseline's share above 1 %; a p99 at most twice the baseline's above
// 100 ms; judged over at least 50 requests per proxy.
var DefaultThresholds = Thresholds{
	ErrorRatio:          Limit{Max: 0.05, ToBaseline: 2, Floor: 0.01},
	ResetRatio:          Limit{Max: 0.05, ToBaseline: 2, Floor: 0.01},
	ConnectFailureRatio: Limit{Max: 0.05, ToBaseline: 2, Floor: 0.01},
	P99:                 Limit{ToBaseline: 2, Floor: 100},
	MinRequests:         50,
}

// Metric names what a finding measured.
type Metric string

// The metrics judged.
const (
	MetricReports             Metric = "reports"
	MetricRequests            Metric = "requests"
	MetricErrorRatio          Metric = "5xx-ratio"
	MetricResetRatio          Metric = "reset-ratio"
	MetricConnectFailureRatio Metric = "connect-failure-ratio"
	MetricP99                 Metric = "p99-ms"
)

// Outcome is what a verdict decides for the step.
type Outcome string

const (
	// Pass: every proxy of the step served enough traffic within its
	// thresholds, and the bake is over.
	Pass Outcome = "Pass"
	// Wait: nothing is wrong yet, but the step cannot pass yet: it bakes,
	// a proxy has too little traffic, or a proxy is silent within the bake.
	Wait Outcome = "Wait"
	// Abort: a proxy breached a threshold, or stayed silent past the bake.
	Abort Outcome = "Abort"
)

// Finding is why a verdict is what it is, for one proxy: the metric, its
// value and the threshold it was held to, in the scope it was measured in
// ("" for all the proxy's judged scopes together).
type Finding struct {
	Outcome   Outcome
	Proxy     string
	Scope     string
	Metric    Metric
	Value     float64
	Threshold float64
	// Baseline is the baseline's value when the threshold is relative to
	// it.
	Baseline float64
	Reason   string
}

func (f Finding) String() string {
	where := f.Proxy
	if f.Scope != "" {
		where += " " + f.Scope
	}
	return fmt.Sprintf("%s: %s: %s %s", f.Outcome, where, f.Metric, f.Reason)
}

// Verdict is the step's outcome and its findings: for an Abort, the
// breaches first (Findings[0] is the one to report), then what waits.
type Verdict struct {
	Outcome  Outcome
	Findings []Finding
}

// Input is what a step is judged on.
type Input struct {
	// Step are the step's proxies; Baseline the proxies still on the
	// previous revision.
	Step, Baseline []Proxy
	// Elapsed is the time since the step began (its window), and Bake how
	// long it bakes.
	Elapsed, Bake time.Duration
	// Silence is how long since the step began a proxy may have reported
	// nothing before its silence aborts the step, however short the bake:
	// a few of its flush intervals.
	Silence    time.Duration
	Thresholds Thresholds
}

// Judge returns the step's verdict (see the package's rules).
func Judge(in Input) Verdict {
	th := in.Thresholds
	baked := in.Elapsed >= in.Bake
	baseline := map[string]Figures{}
	for _, p := range in.Baseline {
		for scope, f := range p.Scopes {
			baseline[scope] = baseline[scope].Add(f)
		}
	}
	step := slices.SortedFunc(slices.Values(in.Step), func(a, b Proxy) int { return cmp.Compare(a.Node, b.Node) })
	var aborts, waits []Finding
	for _, p := range step {
		if !p.Reported {
			f := Finding{Proxy: p.Node, Metric: MetricReports, Value: 0, Threshold: 1}
			if silentFor := max(in.Bake, in.Silence); in.Elapsed >= silentFor {
				f.Outcome, f.Reason = Abort, fmt.Sprintf("0, want at least 1: silent for %s", silentFor)
				aborts = append(aborts, f)
			} else {
				f.Outcome, f.Reason = Wait, "0 yet: silent so far"
				waits = append(waits, f)
			}
			continue
		}
		total := Total(p.Scopes)
		for _, scope := range slices.Sorted(maps.Keys(p.Scopes)) {
			f := p.Scopes[scope]
			if f.Requests < th.MinRequests || th.MinRequests == 0 && f.Requests == 0 {
				continue
			}
			aborts = append(aborts, judgeScope(p.Node, scope, f, baseline[scope], th)...)
		}
		if total.Requests < th.MinRequests || total.Requests == 0 {
			waits = append(waits, Finding{Outcome: Wait, Proxy: p.Node, Metric: MetricRequests,
				Value: float64(total.Requests), Threshold: float64(th.MinRequests),
				Reason: fmt.Sprintf("%d, want at least %d: too little traffic to judge", total.Requests, max(th.MinRequests, 1))})
		}
	}
	switch {
	case len(aborts) > 0:
		return Verdict{Outcome: Abort, Findings: append(aborts, waits...)}
	case len(step) == 0:
		return Verdict{Outcome: Wait, Findings: []Finding{{Outcome: Wait, Metric: MetricReports, Reason: "the step has no proxy"}}}
	case len(waits) > 0:
		return Verdict{Outcome: Wait, Findings: waits}
	case !baked:
		return Verdict{Outcome: Wait, Findings: []Finding{{Outcome: Wait, Reason: fmt.Sprintf("baking: %s of %s", in.Elapsed, in.Bake)}}}
	}
	return Verdict{Outcome: Pass}
}

// judgeScope returns the breaches of one scope of a proxy.
func judgeScope(node, scope string, f, base Figures, th Thresholds) []Finding {
	var out []Finding
	compareBase := base.Requests >= max(th.MinRequests, 1)
	check := func(m Metric, value, baseValue float64, ok, baseOK bool, l Limit) {
		if !ok {
			return
		}
		if l.Max > 0 && value > l.Max {
			out = append(out, Finding{Outcome: Abort, Proxy: node, Scope: scope, Metric: m, Value: value, Threshold: l.Max,
				Reason: fmt.Sprintf("%s, above the ceiling of %s", format(m, value), format(m, l.Max))})
			return
		}
		if l.ToBaseline > 0 && compareBase && baseOK && value > l.Floor {
			limit := baseValue * l.ToBaseline
			if value > limit {
				out = append(out, Finding{Outcome: Abort, Proxy: node, Scope: scope, Metric: m, Value: value, Threshold: limit, Baseline: baseValue,
					Reason: fmt.Sprintf("%s, above %g times the baseline's %s", format(m, value), l.ToBaseline, format(m, baseValue))})
			}
		}
	}
	ratio := func(n, d uint64) float64 { return float64(n) / float64(d) }
	check(MetricErrorRatio, ratio(f.Errors5xx, f.Requests), ratio(base.Errors5xx, base.Requests), true, true, th.ErrorRatio)
	check(MetricResetRatio, ratio(f.Resets, f.Requests), ratio(base.Resets, base.Requests), true, true, th.ResetRatio)
	check(MetricConnectFailureRatio, ratio(f.ConnectFailures, f.Requests), ratio(base.ConnectFailures, base.Requests), true, true, th.ConnectFailureRatio)
	// A p99 of fewer than MinSamplesP99 requests is their slowest: one slow
	// request is no trend, and neither side's p99 is judged below that.
	p99, ok := f.Duration.Quantile(0.99)
	baseP99, baseOK := base.Duration.Quantile(0.99)
	check(MetricP99, p99, baseP99, ok && f.Duration.Count() >= MinSamplesP99, baseOK && base.Duration.Count() >= MinSamplesP99, th.P99)
	return out
}

func format(m Metric, v float64) string {
	if m == MetricP99 {
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}

// ScopeHTTP names the scope of an HTTP connection manager, by its stat
// prefix, and ScopeCluster that of an upstream cluster: the scopes the
// stats receiver keeps a proxy's figures in, and those a change touches
// (publish).
func ScopeHTTP(statPrefix string) string { return scopeHTTP + statPrefix }

// ScopeCluster names an upstream cluster's scope (ScopeHTTP).
func ScopeCluster(name string) string { return "cluster:" + name }

const scopeHTTP = "http:"

// Total is a proxy's figures over its scopes, each request counted once.
// A request counts in the HTTP connection manager that took it and again
// in the cluster it was sent to, so its requests, 5xx responses, resets
// and durations are those of its HTTP scopes when it has any, and of its
// clusters otherwise; its failed connections, which only clusters count,
// are its clusters'.
func Total(scopes map[string]Figures) Figures {
	var http, clusters Figures
	hasHTTP := false
	for scope, f := range scopes {
		if strings.HasPrefix(scope, scopeHTTP) {
			http, hasHTTP = http.Add(f), true
		} else {
			clusters = clusters.Add(f)
		}
	}
	if !hasHTTP {
		return clusters
	}
	http.ConnectFailures = clusters.ConnectFailures
	return http
}
