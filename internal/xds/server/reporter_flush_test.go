package server

import (
	"context"
	"fmt"
	clocktesting "k8s.io/utils/clock/testing"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	prom "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/stats"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// A replica's report of a settled fleet is not written for its proxies'
// stats, however many flushes come; while the fleet rolls out, a proxy's
// window is written when it begins, and then at most once a flush
// interval, whatever the flushes in between. The server serves the stats
// receiver beside ADS, as the operator runs it; the receiver's clock is
// the test's.
func TestReportWritesWindowsOncePerFlushInterval(t *testing.T) {
	const replica = "replica-windows"
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rcv := stats.New(stats.Options{WindowInterval: 10 * time.Second, Now: clock.Now})
	s, addr := startServerWith(t, func(s *Server) { s.AddService(rcv); s.SetStats(rcv) })
	v1 := clusters("a")
	mustPublish(t, s, "v1", v1)
	if _, err := xdstest.Connect(t, xdstest.Dial(t, addr), fleet, "pod-0", resourcev3.ClusterType).Next(""); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, s, 1)

	// pod-0's stats stream: each flush, n requests on listener edge.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := metricsv3.NewMetricsServiceClient(conn).StreamMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var flushes uint64
	flush := func(n float64) {
		t.Helper()
		prefix := "envoy.http_conn_manager_prefix"
		msg := &metricsv3.StreamMetricsMessage{EnvoyMetrics: []*prom.MetricFamily{
			{Name: proto.String("http.downstream_rq_total"), Type: prom.MetricType_COUNTER.Enum(), Metric: []*prom.Metric{{
				Label: []*prom.LabelPair{{Name: &prefix, Value: proto.String("edge")}}, Counter: &prom.Counter{Value: &n}}}},
			{Name: proto.String("server.uptime"), Type: prom.MetricType_GAUGE.Enum(), Metric: []*prom.Metric{{Gauge: &prom.Gauge{Value: proto.Float64(1)}}}},
		}}
		if flushes == 0 {
			msg.Identifier = &metricsv3.StreamMetricsMessage_Identifier{Node: &corev3.Node{Id: "pod-0", Cluster: fleet}}
		}
		if err := st.Send(msg); err != nil {
			t.Fatal(err)
		}
		flushes++
		testenv.Eventually(t, "the receiver to keep the flush", func() (bool, error) {
			rep, _ := rcv.Report(fleet, "pod-0")
			return rep.Reports == flushes, nil
		})
	}

	var calls atomic.Int64
	r := NewReporter(suite.Manager, countedProxies{Server: s, calls: &calls}, operatorNamespace, replica, "")
	r.Interval = time.Nanosecond
	rctx, rcancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = r.Start(rctx); close(stopped) }()
	defer func() { rcancel(); <-stopped }()
	name := report.ShardName(replica, 0)
	reported := func() report.FleetProxies { return reportedFleet(ctx, t, name, fleet) }
	writes := func() []string { return suite.Counter.WritesTo("/configmaps/" + name) }
	// looked waits until the reporter has read the report again twice
	// since: it is past any signal before.
	looked := func() {
		for range 2 {
			n := calls.Load()
			s.tracker.signal()
			testenv.Eventually(t, "the reporter to look again", func() (bool, error) { return calls.Load() > n, nil })
		}
	}
	testenv.Eventually(t, "the report written at start", func() (bool, error) { return reported().Acked == 1, nil })

	// Settled: flushes, a flush interval apart, write nothing.
	suite.Counter.Reset()
	for range 3 {
		clock.Step(10 * time.Second)
		flush(5)
	}
	looked()
	if w := writes(); len(w) != 0 {
		t.Fatalf("a settled fleet's report was written for its stats: %v", w)
	}

	// v2 rolls out, leading no proxy: pod-0's window begins, written with
	// its answer.
	if err := s.SetFleetRollout(ctx, fleet, "v2", clusters("a", "b"), &Staged{Version: "v1", Resources: v1,
		Rollout: publish.Rollout{Revision: "v2", Previous: "v1", Phase: publish.RolloutProgressing}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "pod-0's window reported", func() (bool, error) {
		a := reported().Proxies["pod-0"]
		return a.Acked == "v1" && a.Window != nil, nil
	})
	if w := reported().Proxies["pod-0"].Window; w.Reports != 0 || w.Scopes != nil {
		t.Errorf("pod-0's window as it begins: %+v, want empty", w)
	}
	// Flushes within the interval: the report is not written.
	suite.Counter.Reset()
	for range 3 {
		flush(5)
	}
	clock.Step(9 * time.Second)
	flush(5)
	looked()
	if w := writes(); len(w) != 0 {
		t.Fatalf("the report was written within the flush interval: %v", w)
	}
	// The interval passed: the reporter's next look reads pod-0's stats for
	// the first time since its window began, and the window begins there
	// (what it read may hold what pod-0 served before): still empty, so
	// the report is not written.
	clock.Step(time.Second)
	flush(5)
	looked()
	if w := writes(); len(w) != 0 {
		t.Fatalf("the report was written for a window still empty: %v", w)
	}
	// Another interval: the window is figured again at the reporter's next
	// look, and written, once. That look may come before the flush after
	// it (a signal still pending), which is then counted at the next
	// interval's figuring; so may the look where the window began, before
	// or after the flush of that interval: the window written holds 3 to
	// 5 flushes.
	for range 3 {
		flush(5)
	}
	clock.Step(10 * time.Second)
	flush(5)
	testenv.Eventually(t, "pod-0's window written again", func() (bool, error) {
		w := reported().Proxies["pod-0"].Window
		return w != nil && w.Reports >= 3, fmt.Errorf("pod-0's window %+v", w)
	})
	looked()
	if w := writes(); len(w) != 1 {
		t.Errorf("the report was written %d times, want once: %v", len(w), w)
	}
	if w := reported().Proxies["pod-0"].Window; w.Reports < 3 || w.Reports > 5 || w.Scopes[analysis.ScopeHTTP("edge")].Requests != 5*w.Reports {
		t.Errorf("pod-0's window: %+v, want the 3 to 5 flushes since it began, of 5 requests each", w)
	}
}

// countedProxies is a Server as a Reporter reads it, counting its reports.
type countedProxies struct {
	*Server
	calls *atomic.Int64
}

func (p countedProxies) ProxyReport() report.Report {
	p.calls.Add(1)
	return p.Server.ProxyReport()
}
