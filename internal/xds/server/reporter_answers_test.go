package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// A replica that starts serving a fleet a new version writes its report
// once its proxies have answered, not before: the moment between, when
// they have answered neither way, tells the leader nothing, and its write
// would wake the leader to write the fleet's status once more. Proxies
// that never answer are reported when the interval has passed. The
// interval here is a nanosecond, so that no write waits for the one
// before: what waits, waits for the proxies.
func TestReportWaitsForTheProxiesAnswers(t *testing.T) {
	const replica = "replica-answers"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu     sync.Mutex
		latest = report.Report{"ns/edge": {Version: "v1", Connected: 2, Acked: 2}}
		calls  atomic.Int64
	)
	proxies := stubProxies{changed: make(chan struct{}, 1), report: func() report.Report {
		calls.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return report.Report{"ns/edge": latest["ns/edge"]}
	}}
	set := func(f report.FleetProxies) {
		mu.Lock()
		latest = report.Report{"ns/edge": f}
		mu.Unlock()
		proxies.change()
	}
	r := NewReporter(suite.Manager, proxies, operatorNamespace, replica, "")
	r.Interval = time.Nanosecond
	waits := make(chan time.Duration, 10)
	release := make(chan time.Time)
	r.after = func(d time.Duration) <-chan time.Time {
		waits <- d
		return release
	}
	stopped := make(chan struct{})
	go func() { _ = r.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	name := report.ShardName(replica, 0)
	reported := func() report.FleetProxies { return reportedFleet(ctx, t, name, "ns/edge") }
	// looked waits until the reporter has read the report again twice
	// since: it is past the signal before.
	looked := func() {
		for range 2 {
			n := calls.Load()
			proxies.change()
			testenv.Eventually(t, "the reporter to look again", func() (bool, error) { return calls.Load() > n, nil })
		}
	}
	testenv.Eventually(t, "the report written at start", func() (bool, error) { return reported().Acked == 2, nil })
	writes := func() []string { return suite.Counter.WritesTo("/configmaps/" + name) }

	// v2 is served; the proxies have not answered yet.
	suite.Counter.Reset()
	set(report.FleetProxies{Version: "v2", Connected: 2})
	looked()
	if w := writes(); len(w) != 0 {
		t.Fatalf("the report was written before the proxies answered: %v", w)
	}
	if got := <-waits; got != r.Interval {
		t.Errorf("the reporter waits %v for the answers, want its interval", got)
	}
	set(report.FleetProxies{Version: "v2", Connected: 2, Acked: 1})
	looked()
	if w := writes(); len(w) != 0 {
		t.Fatalf("the report was written before every proxy answered: %v", w)
	}
	set(report.FleetProxies{Version: "v2", Connected: 2, Acked: 1, Nacked: 1, LastNACK: "no"})
	testenv.Eventually(t, "the answers reported", func() (bool, error) { return reported().Nacked == 1, nil })
	if w := writes(); len(w) != 1 {
		t.Errorf("the report was written %d times, want once, with the answers: %v", len(w), w)
	}

	// v3 is served, and the proxies never answer: once the interval has
	// passed, the report says so.
	suite.Counter.Reset()
	set(report.FleetProxies{Version: "v3", Connected: 2})
	looked()
	if w := writes(); len(w) != 0 {
		t.Fatalf("the report was written before the proxies answered: %v", w)
	}
	release <- time.Now()
	testenv.Eventually(t, "the unanswered version reported", func() (bool, error) { return reported().Version == "v3", nil })
	if w := writes(); len(w) != 1 {
		t.Errorf("the report was written %d times, want once: %v", len(w), w)
	}
}

// reportedFleet returns fleet's entry in the report shard name, as the API
// server holds it: the zero entry until the shard is written.
func reportedFleet(ctx context.Context, t *testing.T, name, fleet string) report.FleetProxies {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: name}, cm); err != nil {
		return report.FleetProxies{}
	}
	rep, err := report.Read(cm)
	if err != nil {
		t.Fatal(err)
	}
	return rep[fleet]
}
