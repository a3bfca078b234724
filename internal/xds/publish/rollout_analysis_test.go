package publish

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// judgedCanary is the canary policy with the default analysis.
var judgedCanary = func() *RolloutPolicy {
	p := *canary
	th := analysis.DefaultThresholds
	p.Analysis = &th
	return &p
}()

// shortBake is judgedCanary with a bake of 10 s, shorter than the 30 s its
// proxies may stay silent.
var shortBake = func() *RolloutPolicy {
	p := *judgedCanary
	p.Bake, p.Silence = 10*time.Second, 30*time.Second
	return &p
}()

// figures are n requests, e of them 5xx, each taking ms.
func figures(n, e uint64, ms float64) analysis.Figures {
	f := analysis.Figures{Requests: n, Errors5xx: e}
	for i, b := range analysis.Bounds {
		if ms <= b {
			f.Duration.Counts[i] = n
			return f
		}
	}
	f.Duration.Over = n
	return f
}

// window is a proxy's window of one report per scope given.
func window(scopes map[string]analysis.Figures) *Window {
	return &Window{Reports: uint64(max(len(scopes), 1)), Scopes: scopes}
}

func ingress(f analysis.Figures) *Window {
	return window(map[string]analysis.Figures{"http:ingress": f})
}

// windows has every node of the fleet answer what s serves it, accepting
// it, with the window step for the step's proxies and base for the others.
func windows(s Rollout, nodes []string, step, base *Window) map[string]ProxyAnswer {
	out := answering(s, nodes)
	for n, a := range out {
		a.Window = base
		if s.leads(n) {
			a.Window = step
		}
		out[n] = a
	}
	return out
}

func TestStepRolloutAnalysis(t *testing.T) {
	twenty := fleetNodes(20)
	order := byHash(twenty)
	lead := order[0]
	atStep1 := progressing(0, t0, twenty, 1)
	atStep2 := progressing(1, t0, twenty, 5)
	healthy := ingress(figures(1000, 0, 3))
	// The baseline's share of 5xx: 1 %.
	onePercent := ingress(figures(1000, 10, 3))
	aborted := func(step int, a RolloutAbort, verdicts ...StepVerdict) Rollout {
		r := Rollout{Revision: "v2", Previous: "v1", Phase: RolloutAborted, Step: step, StepStarted: t0, Aborted: &a, Verdicts: verdicts}
		return r
	}
	passedStep1 := StepVerdict{Step: 0, Outcome: analysis.Pass,
		Proxies:  StepFigures{Proxies: 1, Requests: 200, P99: 4.96},
		Baseline: StepFigures{Proxies: 19, Requests: 19000, P99: 4.96}}

	tests := []struct {
		name    string
		policy  *RolloutPolicy
		state   Rollout
		proxies map[string]ProxyAnswer
		touched Touched
		now     time.Time
		promote *RolloutOrder

		action  RolloutAction
		want    Rollout
		waiting string // a part of Waiting
		events  string
		event   string // a part of the first event's message
		// judged is the step's and the baseline's requests when the step
		// was judged.
		judged *[2]uint64
		// recheck is when to decide again, when set.
		recheck time.Duration
	}{
		{name: "a step 5xx-heavy from its start aborts on the ceiling, during the bake",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, ingress(figures(200, 124, 3)), healthy), now: t0.Add(10 * time.Second),
			action: RolloutAborts, events: "RolloutAborted", judged: &[2]uint64{200, 19000},
			want: aborted(0, RolloutAbort{Proxy: lead, Scope: "http:ingress", Metric: "5xx-ratio", Value: 0.62, Threshold: 0.05,
				Detail: "proxy " + lead + " http:ingress: 5xx-ratio 62.00%, above the ceiling of 5.00%"},
				StepVerdict{Step: 0, Outcome: analysis.Abort, Proxies: StepFigures{Proxies: 1, Requests: 200, ErrorRatio: 0.62, P99: 4.96},
					Baseline: StepFigures{Proxies: 19, Requests: 19000, P99: 4.96},
					Finding:  "proxy " + lead + " http:ingress: 5xx-ratio 62.00%, above the ceiling of 5.00%"}),
			event: "version v2 failed its analysis at step 1: proxy " + lead + " http:ingress: 5xx-ratio 62.00%, above the ceiling of 5.00% " +
				"(the step's 200 requests of 1 proxy, 62.00% 5xx, p99 5.0ms; the baseline's 19000 requests of 19 proxies, 0.00% 5xx, p99 5.0ms): " +
				"every proxy is served version v1 again"},
		{name: "under the ceiling but above twice the baseline's share aborts",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, ingress(figures(1000, 40, 3)), onePercent), now: t0.Add(time.Minute),
			action: RolloutAborts, events: "RolloutAborted", judged: &[2]uint64{1000, 19000},
			want: aborted(0, RolloutAbort{Proxy: lead, Scope: "http:ingress", Metric: "5xx-ratio", Value: 0.04, Threshold: 0.02, Baseline: 0.01,
				Detail: "proxy " + lead + " http:ingress: 5xx-ratio 4.00%, above 2 times the baseline's 1.00%"},
				StepVerdict{Step: 0, Outcome: analysis.Abort, Proxies: StepFigures{Proxies: 1, Requests: 1000, ErrorRatio: 0.04, P99: 4.96},
					Baseline: StepFigures{Proxies: 19, Requests: 19000, ErrorRatio: 0.01, P99: 4.96},
					Finding:  "proxy " + lead + " http:ingress: 5xx-ratio 4.00%, above 2 times the baseline's 1.00%"}),
			event: "failed its analysis at step 1"},
		{name: "a slow step aborts on its p99 against the baseline's",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, ingress(figures(1000, 0, 400)), healthy), now: t0.Add(time.Minute),
			action: RolloutAborts, events: "RolloutAborted", judged: &[2]uint64{1000, 19000},
			want: aborted(0, RolloutAbort{Proxy: lead, Scope: "http:ingress", Metric: "p99-ms", Value: 497.5, Threshold: 9.92, Baseline: 4.96,
				Detail: "proxy " + lead + " http:ingress: p99-ms 497.5ms, above 2 times the baseline's 5.0ms"},
				StepVerdict{Step: 0, Outcome: analysis.Abort, Proxies: StepFigures{Proxies: 1, Requests: 1000, P99: 497.5},
					Baseline: StepFigures{Proxies: 19, Requests: 19000, P99: 4.96},
					Finding:  "proxy " + lead + " http:ingress: p99-ms 497.5ms, above 2 times the baseline's 5.0ms"}),
			event: "p99-ms 497.5ms"},
		{name: "a silent proxy waits within the bake",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, nil, healthy), now: t0.Add(30 * time.Second),
			action: RolloutWaits, want: atStep1, judged: &[2]uint64{0, 19000},
			waiting: "step 1 of 3: proxy " + lead + ": reports 0 yet: silent so far (the step's 0 requests of 1 proxy, 0.00% 5xx; the baseline's 19000 requests"},
		{name: "a proxy that reported nothing is silent, as one without a window",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, &Window{}, healthy), now: t0.Add(30 * time.Second),
			action: RolloutWaits, want: atStep1, judged: &[2]uint64{0, 19000}, waiting: "silent so far"},
		{name: "a silent proxy aborts once the bake is over",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, nil, healthy), now: t0.Add(time.Minute),
			action: RolloutAborts, events: "RolloutAborted", judged: &[2]uint64{0, 19000},
			want: aborted(0, RolloutAbort{Proxy: lead, Metric: "reports", Threshold: 1,
				Detail: "proxy " + lead + ": reports 0, want at least 1: silent for 1m0s"},
				StepVerdict{Step: 0, Outcome: analysis.Abort, Proxies: StepFigures{Proxies: 1},
					Baseline: StepFigures{Proxies: 19, Requests: 19000, P99: 4.96},
					Finding:  "proxy " + lead + ": reports 0, want at least 1: silent for 1m0s"}),
			event: "silent for 1m0s"},
		{name: "a silent proxy after a bake shorter than its silence waits, and the step is decided again when its silence would abort",
			policy: shortBake, state: atStep1, proxies: windows(atStep1, twenty, nil, healthy), now: t0.Add(20 * time.Second),
			action: RolloutWaits, want: atStep1, judged: &[2]uint64{0, 19000}, waiting: "silent so far", recheck: 10 * time.Second},
		{name: "a silent proxy past its silence aborts the step, however short the bake",
			policy: shortBake, state: atStep1, proxies: windows(atStep1, twenty, nil, healthy), now: t0.Add(30 * time.Second),
			action: RolloutAborts, events: "RolloutAborted", judged: &[2]uint64{0, 19000},
			want: aborted(0, RolloutAbort{Proxy: lead, Metric: "reports", Threshold: 1,
				Detail: "proxy " + lead + ": reports 0, want at least 1: silent for 30s"},
				StepVerdict{Step: 0, Outcome: analysis.Abort, Proxies: StepFigures{Proxies: 1},
					Baseline: StepFigures{Proxies: 19, Requests: 19000, P99: 4.96},
					Finding:  "proxy " + lead + ": reports 0, want at least 1: silent for 30s"}),
			event: "silent for 30s"},
		{name: "too little traffic waits within the bake",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, ingress(figures(12, 12, 3)), healthy), now: t0.Add(10 * time.Second),
			action: RolloutWaits, want: atStep1, judged: &[2]uint64{12, 19000},
			waiting: "step 1 of 3: proxy " + lead + ": requests 12, want at least 50: too little traffic to judge (the step's 12 requests of 1 proxy, 100.00% 5xx"},
		{name: "too little traffic waits past the bake: it never passes, and never aborts",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, ingress(figures(12, 12, 3)), healthy), now: t0.Add(24 * time.Hour),
			action: RolloutWaits, want: atStep1, judged: &[2]uint64{12, 19000}, waiting: "too little traffic to judge"},
		{name: "a good step waits for its bake, and says its figures",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, ingress(figures(200, 0, 3)), healthy), now: t0.Add(20 * time.Second),
			action: RolloutWaits, want: atStep1, judged: &[2]uint64{200, 19000},
			waiting: "step 1 of 3: baking, 40s left (the step's 200 requests of 1 proxy, 0.00% 5xx, p99 5.0ms; the baseline's 19000 requests of 19 proxies, 0.00% 5xx, p99 5.0ms)"},
		{name: "a good step, baked, is promoted, and its verdict recorded",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, ingress(figures(200, 0, 3)), healthy), now: t0.Add(time.Minute),
			action: RolloutPromotes, events: "RolloutPromoted", judged: &[2]uint64{200, 19000},
			want: func() Rollout {
				r := progressing(1, t0.Add(time.Minute), twenty, 5)
				r.Verdicts = []StepVerdict{passedStep1}
				return r
			}(),
			event: "(step 2 of 3); step 1 passed its analysis: the step's 200 requests of 1 proxy, 0.00% 5xx, p99 5.0ms, the baseline's 19000 requests of 19 proxies, 0.00% 5xx, p99 5.0ms"},
		{name: "a step that breaches after an earlier one passed keeps both verdicts",
			policy: judgedCanary, state: func() Rollout { r := atStep2; r.Verdicts = []StepVerdict{passedStep1}; return r }(),
			proxies: windows(atStep2, twenty, ingress(figures(100, 20, 3)), healthy), now: t0.Add(time.Minute),
			action: RolloutAborts, events: "RolloutAborted", judged: &[2]uint64{500, 15000},
			want: aborted(1, RolloutAbort{Proxy: slices.Min(order[:5]), Scope: "http:ingress", Metric: "5xx-ratio", Value: 0.2, Threshold: 0.05,
				Detail: "proxy " + slices.Min(order[:5]) + " http:ingress: 5xx-ratio 20.00%, above the ceiling of 5.00%"},
				passedStep1,
				StepVerdict{Step: 1, Outcome: analysis.Abort, Proxies: StepFigures{Proxies: 5, Requests: 500, ErrorRatio: 0.2, P99: 4.96},
					Baseline: StepFigures{Proxies: 15, Requests: 15000, P99: 4.96},
					Finding:  "proxy " + slices.Min(order[:5]) + " http:ingress: 5xx-ratio 20.00%, above the ceiling of 5.00%"}),
			event: "at step 2"},
		{name: "only the scopes the change touched are judged",
			policy: judgedCanary, state: atStep1, touched: Touched{"http:ingress": {"ns/web"}},
			proxies: windows(atStep1, twenty,
				window(map[string]analysis.Figures{"http:ingress": figures(200, 0, 3), "http:admin": figures(200, 200, 3)}), healthy),
			now:    t0.Add(time.Minute),
			action: RolloutPromotes, events: "RolloutPromoted", judged: &[2]uint64{200, 19000},
			want: func() Rollout {
				r := progressing(1, t0.Add(time.Minute), twenty, 5)
				r.Verdicts = []StepVerdict{passedStep1}
				return r
			}()},
		{name: "a change that touched no scope traffic shows is judged in every scope",
			policy: judgedCanary, state: atStep1, touched: Touched{},
			proxies: windows(atStep1, twenty,
				window(map[string]analysis.Figures{"http:ingress": figures(200, 0, 3), "http:admin": figures(200, 200, 3)}), healthy),
			now:    t0.Add(time.Minute),
			action: RolloutAborts, events: "RolloutAborted", judged: &[2]uint64{400, 19000},
			want: aborted(0, RolloutAbort{Proxy: lead, Scope: "http:admin", Metric: "5xx-ratio", Value: 1, Threshold: 0.05,
				Detail: "proxy " + lead + " http:admin: 5xx-ratio 100.00%, above the ceiling of 5.00%"},
				StepVerdict{Step: 0, Outcome: analysis.Abort, Proxies: StepFigures{Proxies: 1, Requests: 400, ErrorRatio: 0.5, P99: 4.96},
					Baseline: StepFigures{Proxies: 19, Requests: 19000, P99: 4.96},
					Finding:  "proxy " + lead + " http:admin: 5xx-ratio 100.00%, above the ceiling of 5.00%"})},
		{name: "a promotion by hand skips the analysis, as it skips the bake",
			policy: judgedCanary, state: atStep1, proxies: windows(atStep1, twenty, ingress(figures(200, 200, 3)), healthy), now: t0.Add(time.Second),
			promote: &RolloutOrder{Revision: "v2", Step: 0},
			action:  RolloutPromotes, events: "RolloutPromoted", want: progressing(1, t0.Add(time.Second), twenty, 5)},
		{name: "the analysis waits for the step's proxies to accept, as the bake does",
			policy: judgedCanary, state: atStep1, proxies: func() map[string]ProxyAnswer {
				p := windows(atStep1, twenty, ingress(figures(200, 200, 3)), healthy)
				p[lead] = ProxyAnswer{Acked: "v1", Window: ingress(figures(200, 200, 3))}
				return p
			}(),
			now: t0.Add(time.Minute), action: RolloutWaits, want: atStep1, waiting: "have not accepted version v2 yet"},
		{name: "without analysis in the policy, figures are not looked at",
			policy: canary, state: atStep1, proxies: windows(atStep1, twenty, ingress(figures(200, 200, 3)), nil), now: t0.Add(time.Minute),
			action: RolloutPromotes, events: "RolloutPromoted", want: progressing(1, t0.Add(time.Minute), twenty, 5), event: "(step 2 of 3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := json.Marshal(tt.state)
			in := RolloutInput{Policy: tt.policy, State: tt.state, Target: "v2", Proxies: tt.proxies, Touched: tt.touched, Now: tt.now, Promote: tt.promote}
			d := StepRollout(in)
			if d.Action != tt.action {
				t.Errorf("action %s, want %s (waiting %q)", d.Action, tt.action, d.Waiting)
			}
			if !approxEqual(d.Rollout, tt.want) {
				got, _ := json.Marshal(d.Rollout)
				want, _ := json.Marshal(tt.want)
				t.Errorf("rollout\n  %s\nwant\n  %s", got, want)
			}
			// A step that merely waits records nothing new: no history write.
			if d.Action == RolloutWaits && d.Changed(tt.state) {
				t.Errorf("a waiting step changed the rollout: %+v", d.Rollout)
			}
			if after, _ := json.Marshal(tt.state); string(after) != string(before) {
				t.Errorf("StepRollout changed its input: %s, was %s", after, before)
			}
			if !strings.Contains(d.Waiting, tt.waiting) || (tt.waiting == "") != (d.Waiting == "") {
				t.Errorf("waiting %q, want %q", d.Waiting, tt.waiting)
			}
			if got := reasons(d.Events); got != tt.events {
				t.Errorf("events %q, want %q", got, tt.events)
			}
			if tt.event != "" && (len(d.Events) == 0 || !strings.Contains(d.Events[0].Message, tt.event)) {
				t.Errorf("events %+v, want one saying %q", d.Events, tt.event)
			}
			switch {
			case tt.judged == nil && d.Judged != nil:
				t.Errorf("judged %+v, want no judgement", *d.Judged)
			case tt.judged != nil && (d.Judged == nil || d.Judged.Proxies.Requests != tt.judged[0] || d.Judged.Baseline.Requests != tt.judged[1]):
				t.Errorf("judged %+v, want the step's %d requests and the baseline's %d", d.Judged, tt.judged[0], tt.judged[1])
			}
			if tt.recheck != 0 && d.RecheckAfter != tt.recheck {
				t.Errorf("recheck after %s, want %s", d.RecheckAfter, tt.recheck)
			}
		})
	}
}

// approxEqual is Rollout.equal, with the figures equal to a part in a
// million.
func approxEqual(a, b Rollout) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-6*math.Max(1, math.Abs(y)) }
	nearFigures := func(x, y StepFigures) bool {
		return x.Proxies == y.Proxies && x.Requests == y.Requests && near(x.ErrorRatio, y.ErrorRatio) &&
			near(x.ResetRatio, y.ResetRatio) && near(x.ConnectFailureRatio, y.ConnectFailureRatio) && near(x.P99, y.P99)
	}
	if len(a.Verdicts) != len(b.Verdicts) || (a.Aborted == nil) != (b.Aborted == nil) {
		return false
	}
	for i, v := range a.Verdicts {
		w := b.Verdicts[i]
		if v.Step != w.Step || v.Outcome != w.Outcome || v.Finding != w.Finding || !nearFigures(v.Proxies, w.Proxies) || !nearFigures(v.Baseline, w.Baseline) {
			return false
		}
	}
	if a.Aborted != nil {
		x, y := *a.Aborted, *b.Aborted
		if !near(x.Value, y.Value) || !near(x.Threshold, y.Threshold) || !near(x.Baseline, y.Baseline) {
			return false
		}
		x.Value, x.Threshold, x.Baseline = y.Value, y.Threshold, y.Baseline
		if x != y {
			return false
		}
	}
	a.Verdicts, b.Verdicts, a.Aborted, b.Aborted = nil, nil, nil, nil
	return a.equal(b)
}

// A step's proxy serves a change of B's with errors: the rollout aborts on
// its figures in a scope B's change touched, and B's change alone is
// withheld, though A changed too; the next revision rolls A's change out.
func TestRollWithholdsWhatItsFiguresAborted(t *testing.T) {
	A, B := clusters("a", "a1"), clusters("b", "b1")
	A2, B2 := clusters("a", "a1", "a2"), clusters("b", "b1", "b2")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := &RolloutPolicy{Steps: []RolloutStep{{Proxies: 1}}, Analysis: judgedCanary.Analysis}
	roll := func(h History, ir translate.IR, proxies map[string]ProxyAnswer) (Decision, RolloutDecision) {
		d := Decide(h, ir, Acks{}, nil)
		return d, Roll(h, &d, RolloutInput{Policy: policy, Proxies: proxies, Now: now})
	}
	on := func(v string) map[string]ProxyAnswer {
		return map[string]ProxyAnswer{"pod-1": {Acked: v}, "pod-2": {Acked: v}, "pod-3": {Acked: v}}
	}
	v1 := translated(History{}, A, B)
	h, _ := roll(History{Fleet: "ns/edge"}, v1, nil)
	v2 := translated(h.History, A2, B2)
	d, rd := roll(h.History, v2, on(v1.Version))
	if rd.Action != RolloutStarts {
		t.Fatalf("A's and B's changes: %s", rd.Action)
	}
	answers := on(v1.Version)
	for node, v := range rd.Serve {
		if v == v2.Version {
			answers[node] = ProxyAnswer{Acked: v2.Version, Window: window(map[string]analysis.Figures{
				"cluster:a2": figures(100, 0, 3), "cluster:b2": figures(100, 30, 3)})}
		}
	}
	d, rd = roll(d.History, v2, answers)
	if rd.Action != RolloutAborts || rd.Rollout.Aborted.Scope != "cluster:b2" || !slices.Equal(d.Withheld, []string{"ns/b"}) {
		t.Fatalf("after the first proxy's 5xx in B's cluster: %s %+v, withheld %v", rd.Action, rd.Rollout.Aborted, d.Withheld)
	}
	if w := d.History.Withheld["ns/b"]; !w.Rollout || !w.Analysis || w.Version != v2.Version || !strings.Contains(w.Detail, "cluster:b2: 5xx-ratio 30.00%") {
		t.Errorf("withheld %+v", w)
	}
	if len(d.History.Rollout.Verdicts) != 1 || d.History.Rollout.Verdicts[0].Outcome != analysis.Abort {
		t.Errorf("the history records the verdicts %+v", d.History.Rollout.Verdicts)
	}
	// A's change rolls out, without B's.
	v3 := translated(d.History, A2, B2)
	if want := translated(History{}, A2, B); v3.Version != want.Version {
		t.Fatalf("with B's change withheld, the fleet's content is %s, want A's new and B's before: %s", v3.Version, want.Version)
	}
	if _, rd = roll(d.History, v3, on(v1.Version)); rd.Action != RolloutStarts || rd.Rollout.Previous != v1.Version {
		t.Errorf("A's change: %s from %s", rd.Action, rd.Rollout.Previous)
	}
}
