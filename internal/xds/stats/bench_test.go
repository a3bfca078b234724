package stats

import (
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	prom "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// benchProxies is the fleet the benchmarks simulate: 1000 proxies of one
// fleet, each with a listener and two clusters.
const benchProxies = 1000

// benchFlush is one flush of a proxy that serves through a listener and
// two clusters, as Envoy sends it with the stats matcher (the inclusion
// list): every counter, the 2xx and 5xx classes (the 2xx dropped), the
// durations, and the heartbeat. i varies the counts.
func benchFlush(i int) []*prom.MetricFamily {
	n := float64(100 + i%50)
	e := float64(i % 3)
	edge := label(labelPrefix, "edge")
	var fams []*prom.MetricFamily
	fams = append(fams,
		counter("http.downstream_rq_total", n, edge),
		counter("http.downstream_rq_rx_reset", 0, edge),
		counter("http.downstream_rq_tx_reset", 0, edge),
		durationsMS("http.downstream_rq_time", map[int]uint64{2: uint64(n - e), 9: uint64(e)}, edge))
	xx := &prom.MetricFamily{Name: ptr("http.downstream_rq_xx"), Type: prom.MetricType_COUNTER.Enum()}
	for class, v := range map[string]float64{"2": n - e, "5": e} {
		xx.Metric = append(xx.Metric, &prom.Metric{Label: []*prom.LabelPair{label(labelCodeClass, class), edge}, Counter: &prom.Counter{Value: ptr(v)}})
	}
	fams = append(fams, xx)
	for _, name := range []string{"backend-a", "backend-b"} {
		c := label(labelCluster, name)
		fams = append(fams,
			counter("cluster.upstream_rq_total", n/2, c),
			counter("cluster.upstream_rq_xx", e, label(labelCodeClass, "5"), c),
			counter("cluster.upstream_cx_connect_fail", 0, c),
			durationsMS("cluster.upstream_rq_time", map[int]uint64{2: uint64(n / 2)}, c))
	}
	return append(fams, heartbeat())
}

func ptr[T any](v T) *T { return &v }

// BenchmarkReceiverFlush measures the receiver's cost at 1000 proxies of
// one rolling fleet, each streaming its inclusion list: an iteration is
// one flush of every proxy (Envoy's every 10 s; here one after the other),
// over 20 gRPC connections in the benchmark's own process, and one
// figuring of the fleet's windows (as the server's report does once a
// flush interval). It reports the process's CPU time per flush per proxy
// (cpu-µs/flush/proxy: the receiver's, and the simulated proxies' own
// sending, which a real fleet pays in Envoy), the time to figure the
// fleet's windows (windows-µs), and the heap per proxy once they all
// stream (heap-B/proxy: the record, the marks, and both ends of the gRPC
// stream).
func BenchmarkReceiverFlush(b *testing.B) {
	r := New(Options{})
	var received atomic.Int64
	var target atomic.Int64
	done := make(chan struct{}, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	counted{Receiver: r, received: &received, target: &target, done: done}.Register(g)
	go func() { _ = g.Serve(l) }()
	b.Cleanup(g.Stop)
	lis := l.Addr().String()
	var conns []metricsv3.MetricsServiceClient
	for range 20 {
		conns = append(conns, dial(b, lis, grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	streams := make([]metricsv3.MetricsService_StreamMetricsClient, benchProxies)
	versions := map[string]map[string]string{fleet: {}}
	round := func(first bool) {
		target.Store(received.Load() + benchProxies)
		var wg sync.WaitGroup
		for c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < benchProxies; i += len(conns) {
					msg := &metricsv3.StreamMetricsMessage{EnvoyMetrics: benchFlush(i)}
					if first {
						msg.Identifier = node(fmt.Sprintf("edge-7d9f8c6b5-%05d", i), fleet)
					}
					if err := streams[i].Send(msg); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		<-done
	}
	for i := range streams {
		streams[i] = open(b, conns[i%len(conns)])
		versions[fleet][fmt.Sprintf("edge-7d9f8c6b5-%05d", i)] = "v2"
	}
	round(true)
	if w := r.Windows(versions); len(w[fleet]) != benchProxies {
		b.Fatalf("%d windows, want %d", len(w[fleet]), benchProxies)
	}
	round(false)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	r.o.Now = func() time.Time { return time.Now().Add(time.Hour) } // every figuring is due
	var figuring time.Duration
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		round(false)
		start := time.Now()
		w := r.Windows(versions)
		figuring += time.Since(start)
		if len(w[fleet]) != benchProxies {
			b.Fatalf("%d windows, want %d", len(w[fleet]), benchProxies)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N)/benchProxies, "cpu-µs/flush/proxy")
	b.ReportMetric(float64(figuring.Microseconds())/float64(b.N), "windows-µs")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchProxies, "heap-B/proxy")
	if rep, _ := r.Report(fleet, "edge-7d9f8c6b5-00000"); len(rep.Scopes) != 3 || rep.Dropped == 0 {
		b.Errorf("a proxy's record: %d scopes, %d dropped; want 3, and the 2xx class dropped", len(rep.Scopes), rep.Dropped)
	}
}

// BenchmarkReceiverKeep measures the receiver alone, without gRPC: an
// iteration adds one flush of each of 1000 proxies to their records
// (keep), and reports the CPU time per flush per proxy and the heap of
// the records per proxy, with their marks.
func BenchmarkReceiverKeep(b *testing.B) {
	r := New(Options{})
	msgs := make([]*metricsv3.StreamMetricsMessage, benchProxies)
	keys := make([]Key, benchProxies)
	versions := map[string]map[string]string{fleet: {}}
	for i := range msgs {
		msgs[i] = &metricsv3.StreamMetricsMessage{EnvoyMetrics: benchFlush(i)}
		versions[fleet][fmt.Sprintf("edge-7d9f8c6b5-%05d", i)] = "v2"
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range msgs {
		n := node(fmt.Sprintf("edge-7d9f8c6b5-%05d", i), fleet).Node
		k, err := r.admit(uint64(i+1), "", n)
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
		if err := r.keep(uint64(i+1), k, msgs[i]); err != nil {
			b.Fatal(err)
		}
	}
	r.Windows(versions)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(msgs)
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		for i, m := range msgs {
			if err := r.keep(uint64(i+1), keys[i], m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/1000/float64(b.N)/benchProxies, "cpu-µs/flush/proxy")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchProxies, "heap-B/proxy")
}

// counted is the benchmark's Receiver as it is served: it counts the
// messages kept, and signals done once target are.
type counted struct {
	*Receiver
	received, target *atomic.Int64
	done             chan struct{}
}

func (c counted) Register(s *grpc.Server) { metricsv3.RegisterMetricsServiceServer(s, c) }

func (c counted) StreamMetrics(s metricsv3.MetricsService_StreamMetricsServer) error {
	return c.Receiver.StreamMetrics(&countedStream{MetricsService_StreamMetricsServer: s, c: c})
}

type countedStream struct {
	metricsv3.MetricsService_StreamMetricsServer
	c    counted
	kept bool
}

// Recv counts the stream's message before, which the Receiver kept before
// it asked for the next one: done is signalled once target are kept.
func (s *countedStream) Recv() (*metricsv3.StreamMetricsMessage, error) {
	if s.kept && s.c.received.Add(1) == s.c.target.Load() {
		s.c.done <- struct{}{}
	}
	m, err := s.MetricsService_StreamMetricsServer.Recv()
	s.kept = err == nil
	return m, err
}

// processCPU is the CPU time this process used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
