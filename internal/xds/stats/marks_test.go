package stats

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// Marks, step by step: each step sets the Receiver's Reports, the
// versions the proxies run and the time, and wants the windows.
func TestMarks(t *testing.T) {
	const other = "ns/other"
	e, b := analysis.ScopeHTTP("edge"), analysis.ScopeCluster("backend")
	t0 := time.Unix(1000, 0)
	first := t0.Add(-time.Hour) // when the Receiver first heard of the proxies
	rep := func(node string, reports uint64, scopes map[string]analysis.Figures) Report {
		return Report{Key: Key{fleet, node}, Reports: reports, First: first, Scopes: scopes}
	}
	figures := func(n, e5 uint64) analysis.Figures { return analysis.Figures{Requests: n, Errors5xx: e5} }
	win := func(reports uint64, scopes map[string]analysis.Figures) *publish.Window {
		return &publish.Window{Reports: reports, Scopes: scopes}
	}
	type step struct {
		name     string
		at       time.Duration // after t0
		reports  []Report      // the Receiver's, of fleet ns/edge
		versions map[string]map[string]string
		want     map[string]map[string]*publish.Window
	}
	steps := []step{{
		name:    "a proxy first appears: its window begins, empty",
		reports: []Report{rep("pod-1", 5, map[string]analysis.Figures{e: figures(100, 1)})},
		versions: map[string]map[string]string{
			fleet: {"pod-1": "v1", "pod-2": "v1"},
		},
		// pod-2's stats do not come here: no window.
		want: map[string]map[string]*publish.Window{fleet: {"pod-1": win(0, nil)}},
	}, {
		name:     "a flush within the interval: the window as it was",
		at:       5 * time.Second,
		reports:  []Report{rep("pod-1", 6, map[string]analysis.Figures{e: figures(110, 3)})},
		versions: map[string]map[string]string{fleet: {"pod-1": "v1", "pod-2": "v1"}},
		want:     map[string]map[string]*publish.Window{fleet: {"pod-1": win(0, nil)}},
	}, {
		name: "the interval passed: the first Reports read since they appeared, where their windows begin (the first holds what pod-2 served before)",
		at:   10 * time.Second,
		reports: []Report{
			rep("pod-1", 7, map[string]analysis.Figures{e: figures(120, 3), b: figures(0, 0)}),
			{Key: Key{fleet, "pod-2"}, Reports: 1, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(4, 0)}},
		},
		versions: map[string]map[string]string{fleet: {"pod-1": "v1", "pod-2": "v1"}},
		want:     map[string]map[string]*publish.Window{fleet: {"pod-1": win(0, nil), "pod-2": win(0, nil)}},
	}, {
		name: "the interval passed: figured again, since the marks",
		at:   20 * time.Second,
		reports: []Report{
			rep("pod-1", 8, map[string]analysis.Figures{e: figures(130, 3), b: figures(0, 0)}),
			{Key: Key{fleet, "pod-2"}, Reports: 2, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(9, 0)}},
		},
		versions: map[string]map[string]string{fleet: {"pod-1": "v1", "pod-2": "v1"}},
		// backend served no request in the window: left out.
		want: map[string]map[string]*publish.Window{fleet: {
			"pod-1": win(1, map[string]analysis.Figures{e: figures(10, 0)}),
			"pod-2": win(1, map[string]analysis.Figures{e: figures(5, 0)}),
		}},
	}, {
		name: "pod-1 runs v2: its window begins again, empty; pod-2's as it was",
		at:   22 * time.Second,
		reports: []Report{
			rep("pod-1", 8, map[string]analysis.Figures{e: figures(130, 3)}),
			{Key: Key{fleet, "pod-2"}, Reports: 2, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(9, 0)}},
		},
		versions: map[string]map[string]string{fleet: {"pod-1": "v2", "pod-2": "v1"}},
		want: map[string]map[string]*publish.Window{fleet: {
			"pod-1": win(0, nil),
			"pod-2": win(1, map[string]analysis.Figures{e: figures(5, 0)}),
		}},
	}, {
		name: "pod-1's first flush since v2, which may hold some of v1: its window begins there; pod-2 accepted nothing (it reconnected): no window, its mark kept",
		at:   30 * time.Second,
		reports: []Report{
			rep("pod-1", 10, map[string]analysis.Figures{e: figures(150, 13), b: figures(20, 10)}),
			{Key: Key{fleet, "pod-2"}, Reports: 3, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(9, 0)}},
		},
		versions: map[string]map[string]string{fleet: {"pod-1": "v2", "pod-2": ""}},
		want:     map[string]map[string]*publish.Window{fleet: {"pod-1": win(0, nil)}},
	}, {
		name: "pod-2 accepts v1 again: its window goes on",
		at:   30 * time.Second,
		reports: []Report{
			rep("pod-1", 10, map[string]analysis.Figures{e: figures(150, 13), b: figures(20, 10)}),
			{Key: Key{fleet, "pod-2"}, Reports: 3, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(9, 0)}},
		},
		versions: map[string]map[string]string{fleet: {"pod-1": "v2", "pod-2": "v1"}},
		want: map[string]map[string]*publish.Window{fleet: {
			"pod-1": win(0, nil),
			"pod-2": win(1, map[string]analysis.Figures{e: figures(5, 0)}), // as figured at 20 s
		}},
	}, {
		name: "pod-2 accepts v2: a new window; the proxy record of pod-1 made again (forgotten in between): from nothing",
		at:   31 * time.Second,
		reports: []Report{
			{Key: Key{fleet, "pod-1"}, Reports: 1, First: t0.Add(21 * time.Second), Scopes: map[string]analysis.Figures{e: figures(2, 0)}},
			{Key: Key{fleet, "pod-2"}, Reports: 3, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(9, 0)}},
		},
		versions: map[string]map[string]string{fleet: {"pod-1": "v2", "pod-2": "v2"}},
		want: map[string]map[string]*publish.Window{fleet: {
			"pod-1": win(0, nil), // not figured yet
			"pod-2": win(0, nil),
		}},
	}, {
		name: "figured again",
		at:   40 * time.Second,
		reports: []Report{
			{Key: Key{fleet, "pod-1"}, Reports: 1, First: t0.Add(21 * time.Second), Scopes: map[string]analysis.Figures{e: figures(2, 0)}},
			{Key: Key{fleet, "pod-2"}, Reports: 3, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(9, 0)}},
		},
		versions: map[string]map[string]string{fleet: {"pod-1": "v2", "pod-2": "v2"}},
		want: map[string]map[string]*publish.Window{fleet: {
			"pod-1": win(1, map[string]analysis.Figures{e: figures(2, 0)}),
			"pod-2": win(0, nil),
		}},
	}, {
		name: "pod-1 leaves, another fleet rolls out",
		at:   41 * time.Second,
		reports: []Report{
			{Key: Key{fleet, "pod-2"}, Reports: 4, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(19, 0)}},
			{Key: Key{other, "pod-1"}, Reports: 9, First: first, Scopes: map[string]analysis.Figures{e: figures(19, 0)}},
		},
		versions: map[string]map[string]string{fleet: {"pod-2": "v2"}, other: {"pod-1": "w1"}},
		want: map[string]map[string]*publish.Window{
			fleet: {"pod-2": win(0, nil)},
			other: {"pod-1": win(0, nil)},
		},
	}, {
		name: "ns/edge no longer rolls out: its marks are dropped",
		at:   42 * time.Second,
		reports: []Report{
			{Key: Key{fleet, "pod-2"}, Reports: 4, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(19, 0)}},
			{Key: Key{other, "pod-1"}, Reports: 9, First: first, Scopes: map[string]analysis.Figures{e: figures(19, 0)}},
		},
		versions: map[string]map[string]string{other: {"pod-1": "w1"}},
		want:     map[string]map[string]*publish.Window{other: {"pod-1": win(0, nil)}},
	}, {
		name: "ns/edge rolls out again: pod-2's window begins anew",
		at:   70 * time.Second,
		reports: []Report{
			{Key: Key{fleet, "pod-2"}, Reports: 6, First: t0.Add(9 * time.Second), Scopes: map[string]analysis.Figures{e: figures(29, 0)}},
		},
		versions: map[string]map[string]string{fleet: {"pod-2": "v2"}},
		want:     map[string]map[string]*publish.Window{fleet: {"pod-2": win(0, nil)}},
	}}
	m := NewMarks(10 * time.Second)
	for _, s := range steps {
		held := map[Key]Report{}
		for _, r := range s.reports {
			held[r.Key] = r
		}
		got := m.Windows(s.versions, func(k Key) (Report, bool) { r, ok := held[k]; return r, ok }, t0.Add(s.at))
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s:\n got  %s\n want %s", s.name, js(got), js(s.want))
		}
	}
	if len(m.fleets) != 1 || len(m.fleets[fleet].proxies) != 1 {
		t.Errorf("marks left: %+v, want pod-2's of ns/edge alone", m.fleets)
	}
}

// A fleet's windows are due to be figured again once the interval passed
// since they last were, and only for a fleet with marks.
func TestMarksDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := NewMarks(10 * time.Second)
	held := func(Key) (Report, bool) { return Report{Key: Key{fleet, "pod-1"}}, true }
	if m.Due(fleet, t0) {
		t.Error("due without marks")
	}
	m.Windows(map[string]map[string]string{fleet: {"pod-1": "v1"}}, held, t0)
	for _, c := range []struct {
		fleet string
		at    time.Duration
		want  bool
	}{{fleet, 0, false}, {fleet, 9 * time.Second, false}, {fleet, 10 * time.Second, true}, {"ns/other", 10 * time.Second, false}} {
		if got := m.Due(c.fleet, t0.Add(c.at)); got != c.want {
			t.Errorf("%s at %v: due %v, want %v", c.fleet, c.at, got, c.want)
		}
	}
	// A fleet whose proxies left has no marks.
	m.Windows(map[string]map[string]string{fleet: {}}, held, t0.Add(time.Minute))
	if m.Due(fleet, t0.Add(time.Hour)) {
		t.Error("due without marks")
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A window leaves out the scopes of the proxy's own bootstrap: its xDS
// cluster, the ready listener and the admin cluster.
func TestMarksLeaveTheBootstrapsScopesOut(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := NewMarks(10*time.Second, BootstrapScopes("xds_cluster")...)
	start := Report{Key: Key{fleet, "pod-1"}, First: t0}
	end := Report{Key: Key{fleet, "pod-1"}, First: t0, Reports: 3, Scopes: map[string]analysis.Figures{
		analysis.ScopeCluster("xds_cluster"):       {Requests: 1, Resets: 1},
		analysis.ScopeCluster("envoy_admin"):       {Requests: 4},
		analysis.ScopeHTTP("envoy_ready_stats"):    {Requests: 4},
		analysis.ScopeHTTP("edge"):                 {Requests: 8, Errors5xx: 7},
		analysis.ScopeCluster("xds_cluster_other"): {Requests: 2},
	}}
	held := start
	report := func(Key) (Report, bool) { return held, true }
	versions := map[string]map[string]string{fleet: {"pod-1": "v1"}}
	m.Windows(versions, report, t0)
	// The first flush read, where the window begins.
	held = Report{Key: start.Key, First: t0, Reports: 1, Scopes: map[string]analysis.Figures{analysis.ScopeHTTP("edge"): {Requests: 1}}}
	m.Windows(versions, report, t0.Add(10*time.Second))
	held = end
	got := m.Windows(versions, report, t0.Add(20*time.Second))[fleet]["pod-1"]
	want := &publish.Window{Reports: 2, Scopes: map[string]analysis.Figures{analysis.ScopeHTTP("edge"): {Requests: 7, Errors5xx: 7}, analysis.ScopeCluster("xds_cluster_other"): {Requests: 2}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("window %s, want %s", js(got), js(want))
	}
	// Nothing but the bootstrap's own traffic: no scope at all.
	held = Report{Key: end.Key, First: t0, Reports: 4, Scopes: map[string]analysis.Figures{analysis.ScopeCluster("xds_cluster"): {Requests: 2}}}
	m.Windows(map[string]map[string]string{fleet: {"pod-1": "v2"}}, report, t0.Add(30*time.Second))
	// The flush after the change, where the window begins; then one more.
	held.Reports, held.Scopes = 5, map[string]analysis.Figures{analysis.ScopeCluster("xds_cluster"): {Requests: 3}}
	m.Windows(map[string]map[string]string{fleet: {"pod-1": "v2"}}, report, t0.Add(40*time.Second))
	held.Reports, held.Scopes = 6, map[string]analysis.Figures{analysis.ScopeCluster("xds_cluster"): {Requests: 4}}
	if got := m.Windows(map[string]map[string]string{fleet: {"pod-1": "v2"}}, report, t0.Add(50*time.Second))[fleet]["pod-1"]; got.Reports != 1 || got.Scopes != nil {
		t.Errorf("window %s, want one report and no scope", js(got))
	}
}
