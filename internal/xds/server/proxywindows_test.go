package server

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// stubStats is a ProxyStats that records the versions it is asked about
// and gives the windows it holds.
type stubStats struct {
	mu      sync.Mutex
	asked   []map[string]map[string]string
	windows map[string]map[string]*publish.Window
	changed chan struct{}
}

func (s *stubStats) Windows(versions map[string]map[string]string) map[string]map[string]*publish.Window {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, versions)
	return s.windows
}

func (s *stubStats) WindowsChanged() <-chan struct{} { return s.changed }

func (s *stubStats) last() map[string]map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[len(s.asked)-1]
}

// While a fleet rolls out, the report asks the stats for the windows of
// its proxies, by the version each accepted, and carries each window with
// its proxy's answer; a window of a proxy not connected here is not
// reported, and a settled fleet asks for none. A signal of the stats is
// one of the report's.
func TestProxyReportCarriesWindows(t *testing.T) {
	w := &publish.Window{Reports: 2, Scopes: map[string]analysis.Figures{"http:edge": {Requests: 10, Errors5xx: 4}}}
	stats := &stubStats{changed: make(chan struct{}, 1), windows: map[string]map[string]*publish.Window{
		fleet: {"pod-0": w, "pod-9": w},
	}}
	s, addr := startServerWith(t, func(s *Server) { s.SetStats(stats) })
	c := xdstest.Dial(t, addr)
	v1 := clusters("a")
	mustPublish(t, s, "v1", v1)
	for _, node := range []string{"pod-0", "pod-1"} {
		if _, err := xdstest.Connect(t, c, fleet, node, resourcev3.ClusterType).Next(""); err != nil {
			t.Fatal(err)
		}
	}
	waitAcked(t, s, 2)

	// v2 rolls out; the step leads no proxy: both run v1.
	if err := s.SetFleetRollout(context.Background(), fleet, "v2", clusters("a", "b"), &Staged{Version: "v1", Resources: v1,
		Rollout: publish.Rollout{Revision: "v2", Previous: "v1", Phase: publish.RolloutProgressing}}); err != nil {
		t.Fatal(err)
	}
	got := s.ProxyReport()[fleet].Proxies
	want := map[string]publish.ProxyAnswer{"pod-0": {Acked: "v1", Window: w}, "pod-1": {Acked: "v1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the report's answers: %v, want %v", got, want)
	}
	if asked := stats.last(); !reflect.DeepEqual(asked, map[string]map[string]string{fleet: {"pod-0": "v1", "pod-1": "v1"}}) {
		t.Errorf("the stats were asked for %v, want both proxies at v1", asked)
	}

	// A flush that changes the windows is a change of the report.
	select {
	case <-s.ProxiesChanged():
	default:
	}
	stats.changed <- struct{}{}
	select {
	case <-s.ProxiesChanged():
	case <-time.After(time.Minute): // no speed goal: it ends a test that will not pass
		t.Fatal("the stats' signal did not reach the report")
	}

	// Settled: no answers, and the stats asked for none, so that they drop
	// their marks.
	mustPublish(t, s, "v2", clusters("a", "b"))
	if got := s.ProxyReport()[fleet]; got.Proxies != nil {
		t.Errorf("a settled fleet's report lists its proxies: %v", got.Proxies)
	}
	if asked := stats.last(); len(asked) != 0 {
		t.Errorf("the stats were asked for %v, want nothing", asked)
	}
}

// waitAcked waits until n proxies of the test fleet accepted its version.
func waitAcked(t *testing.T, s *Server, n int) {
	t.Helper()
	// No speed goal: the bound only ends a test that will not pass.
	testenv.Poll(t, 5*time.Millisecond, time.Minute, "the proxies' acceptance", func() (bool, error) {
		c := s.Tracker().Counts(fleet, s.Version(fleet))
		return c.Acked == n, fmt.Errorf("%d of %d proxies accepted %s", c.Acked, n, s.Version(fleet))
	})
}
