package stats

import (
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// A replica reports, while a fleet rolls out, each of its proxies' window
// (publish.Window): what the proxy served since it began running the
// version of its answer, as this replica saw it. Marks keep where each
// window begins: the first of its Reports that this replica reads after
// the proxy first appeared among the rolling fleet's proxies, or after the
// version it runs changed. The version is the one it last accepted
// (publish.ProxyAnswer.Acked): Envoy accepts a version once it applied
// it, so what it serves afterwards is that version's. The flush that
// comes after the change holds what the proxy served before it too (up to
// a flush interval of the version before), so the window begins after it,
// and is empty (Reports 0) until then. Counted from the change itself, a
// step with a short bake passed on what its proxies served of the
// previous version (envoyconfig's TestRealEnvoysRolloutJudgedByTheirStats).
// So does a proxy that first appears: a fleet that begins to roll out
// has its step's proxies on the new version from the start, and a
// proxy's first message holds all it served since it started; counted at
// once, a step's first proxy was judged on the traffic it had served the
// version before (the task page "Rolling out a change"). A proxy that has
// accepted nothing yet has no window; one that answers nothing for a
// while (its stream reconnects) keeps its mark, and its window goes on
// once it accepts the same version again.
//
// Windows change with every flush of every proxy; a fleet's windows are
// figured again at most once per Marks.Interval (the flush interval), so
// that the report that carries them is rewritten at most that often. A
// window that begins is given at once: it comes with a new answer, which
// changes the report anyway.
//
// A window leaves out the scopes of what the proxy's bootstrap declares
// itself (Marks.Own, BootstrapScopes): its xDS cluster, and the ready
// listener and the admin cluster that probes and scrapes go through.
// Their traffic is the operator's and the kubelet's, the same whatever
// revision runs: judged, a reconnection to the xDS server would count as
// the step's reset.
//
// Marks are pure: the Reports and the time are inputs.
type Marks struct {
	// Interval is the least time between two figurings of a fleet's
	// windows.
	Interval time.Duration
	// Own are the scopes left out of the windows.
	Own    map[string]bool
	fleets map[string]*fleetMarks
}

// fleetMarks are the marks of one fleet's proxies, by node id, and when
// its windows were last figured.
type fleetMarks struct {
	figured time.Time
	proxies map[string]*mark
}

// mark is where a proxy's window begins: the version it runs, and its
// Report then (zero when the Receiver held none); until settled, the
// Report the version changed at, and the window begins at the next one
// read (the flush after the change may hold the version before). window
// is its window as last figured, nil while the Receiver holds no Report of
// it.
type mark struct {
	version string
	start   Report
	settled bool
	window  *publish.Window
}

// NewMarks returns Marks that figure a fleet's windows at most once per
// interval, leaving the scopes own out.
func NewMarks(interval time.Duration, own ...string) *Marks {
	m := &Marks{Interval: interval, Own: map[string]bool{}, fleets: map[string]*fleetMarks{}}
	for _, s := range own {
		m.Own[s] = true
	}
	return m
}

// BootstrapScopes are the scopes of what a fleet's bootstrap declares
// itself, xdsCluster its xDS server's cluster: left out of the windows.
func BootstrapScopes(xdsCluster string) []string {
	return []string{analysis.ScopeCluster(xdsCluster), analysis.ScopeCluster(proxy.AdminClusterName), analysis.ScopeHTTP(proxy.ReadyListenerName)}
}

// Windows returns the windows of the proxies that versions names, by
// fleet and node id: versions gives, of each fleet that rolls out, the
// version each of its proxies runs ("" for one that accepted none: it
// gets no window, and keeps its mark). When a proxy has no mark, or its
// version differs from its mark's, its window begins at the first of its
// Reports read after that (empty until then); report gives
// a proxy's Report as it stands (false when there is none: it gets no
// window). The marks of every other fleet and proxy are dropped: the
// fleet no longer rolls out, or the proxy left.
func (m *Marks) Windows(versions map[string]map[string]string, report func(Key) (Report, bool), now time.Time) map[string]map[string]*publish.Window {
	if m.fleets == nil {
		m.fleets = map[string]*fleetMarks{}
	}
	for fleet := range m.fleets {
		if _, ok := versions[fleet]; !ok {
			delete(m.fleets, fleet)
		}
	}
	var out map[string]map[string]*publish.Window
	for fleet, nodes := range versions {
		fm := m.fleets[fleet]
		if fm == nil {
			fm = &fleetMarks{proxies: map[string]*mark{}}
			m.fleets[fleet] = fm
		}
		figure := fm.figured.IsZero() || now.Sub(fm.figured) >= m.Interval
		for node := range fm.proxies {
			if _, ok := nodes[node]; !ok {
				delete(fm.proxies, node)
			}
		}
		for node, version := range nodes {
			if version == "" {
				continue
			}
			key := Key{Fleet: fleet, Node: node}
			mk := fm.proxies[node]
			switch {
			case mk == nil || mk.version != version:
				start, _ := report(key)
				mk = &mark{version: version, start: start}
				fm.proxies[node] = mk
				mk.window = m.windowOf(key, mk.start, report)
			case figure || mk.window == nil:
				// A proxy whose stats begin to come here is given its
				// window at once, as one whose window begins.
				if !mk.settled {
					if end, ok := report(key); ok && (end.Reports > mk.start.Reports || !end.First.Equal(mk.start.First)) {
						mk.start, mk.settled = end, true
					}
				}
				mk.window = m.windowOf(key, mk.start, report)
			}
			if mk.window != nil {
				if out == nil {
					out = map[string]map[string]*publish.Window{}
				}
				if out[fleet] == nil {
					out[fleet] = map[string]*publish.Window{}
				}
				out[fleet][node] = mk.window
			}
		}
		if figure {
			fm.figured = now
		}
	}
	return out
}

// Due reports whether fleet's windows, if it has marks, would be figured
// again at now: a flush of one of its proxies then changes them.
func (m *Marks) Due(fleet string, now time.Time) bool {
	fm := m.fleets[fleet]
	return fm != nil && len(fm.proxies) > 0 && now.Sub(fm.figured) >= m.Interval
}

// windowOf figures the window that begins at start, from the proxy's
// Report as it stands; nil when there is none.
func (m *Marks) windowOf(key Key, start Report, report func(Key) (Report, bool)) *publish.Window {
	end, ok := report(key)
	if !ok {
		return nil
	}
	w := Since(start, end)
	for s := range w.Scopes {
		if m.Own[s] {
			delete(w.Scopes, s)
		}
	}
	if len(w.Scopes) == 0 {
		w.Scopes = nil
	}
	return w
}

// Since is a proxy's window from start to end, two of its Reports: the
// messages received between them, and the figures of each scope that
// served a request in between. A start of another record than end's (the
// proxy was forgotten in between, or had none) counts from nothing, as
// Window does.
func Since(start, end Report) *publish.Window {
	if !end.First.Equal(start.First) {
		start = Report{}
	}
	w := &publish.Window{Reports: end.Reports - start.Reports}
	for s, f := range end.Scopes {
		d := f.Sub(start.Scopes[s])
		if d.Requests == 0 {
			continue
		}
		if w.Scopes == nil {
			w.Scopes = map[string]analysis.Figures{}
		}
		w.Scopes[s] = d
	}
	return w
}
