package stats

import (
	"context"
	"crypto/tls"
	"fmt"
	clocktesting "k8s.io/utils/clock/testing"
	"net"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	prom "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	fleetid "github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

var testPKI = xdstest.TestPKI

const fleet = "ns/edge"

var newAuthority = xdstest.NewAuthority

// serveTLS serves r over mutual TLS on 127.0.0.1, as the xDS server does,
// with a server certificate for localhost from a, until the test ends. It
// returns the address.
func serveTLS(t testing.TB, a pki.Authority, r *Receiver) string {
	t.Helper()
	cfg := xdstest.ServerTLSConfig(t, a)
	return serve(t, r, grpc.Creds(credentials.NewTLS(cfg)))
}

func serve(t testing.TB, r *Receiver, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	r.Register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// dialAs connects with a client certificate of fleet namespace/name from a.
func dialAs(t testing.TB, addr string, a pki.Authority, namespace, name string) metricsv3.MetricsServiceClient {
	t.Helper()
	return dialFrom(t, addr, a, a, namespace, name)
}

// dialFrom connects with a client certificate of fleet namespace/name from
// issuer, trusting server's CA.
func dialFrom(t testing.TB, addr string, issuer, server pki.Authority, namespace, name string) metricsv3.MetricsServiceClient {
	t.Helper()
	leaf, err := pki.IssueClient(issuer, fleetid.ID{Namespace: namespace, Name: name}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, RootCAs: server.Pool(), ServerName: "localhost"}
	return dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
}

func dial(t testing.TB, addr string, opts ...grpc.DialOption) metricsv3.MetricsServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return metricsv3.NewMetricsServiceClient(conn)
}

// open opens a stream, ended with the test.
func open(t testing.TB, c metricsv3.MetricsServiceClient) metricsv3.MetricsService_StreamMetricsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := c.StreamMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ended sends msgs, then closes the stream and returns how it ended: the
// receiver answers only when it ends a stream.
func ended(s metricsv3.MetricsService_StreamMetricsClient, msgs ...*metricsv3.StreamMetricsMessage) error {
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			break
		}
	}
	_, err := s.CloseAndRecv()
	return err
}

func node(id, cluster string) *metricsv3.StreamMetricsMessage_Identifier {
	return &metricsv3.StreamMetricsMessage_Identifier{Node: &corev3.Node{Id: id, Cluster: cluster}}
}

func label(name, value string) *prom.LabelPair { return &prom.LabelPair{Name: &name, Value: &value} }

func counter(name string, v float64, labels ...*prom.LabelPair) *prom.MetricFamily {
	return &prom.MetricFamily{Name: proto.String(name), Type: prom.MetricType_COUNTER.Enum(),
		Metric: []*prom.Metric{{Label: labels, Counter: &prom.Counter{Value: &v}}}}
}

func heartbeat() *prom.MetricFamily {
	return &prom.MetricFamily{Name: proto.String("server.uptime"), Type: prom.MetricType_GAUGE.Enum(),
		Metric: []*prom.Metric{{Gauge: &prom.Gauge{Value: proto.Float64(3)}}}}
}

// durationsMS is a request-duration histogram of one flush: counts[i]
// samples in bucket i.
func durationsMS(name string, counts map[int]uint64, labels ...*prom.LabelPair) *prom.MetricFamily {
	h := &prom.Histogram{}
	var c uint64
	for i, b := range analysis.Bounds {
		c += counts[i]
		h.Bucket = append(h.Bucket, &prom.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(c)})
	}
	h.SampleCount = proto.Uint64(c + counts[analysis.NumBuckets])
	return &prom.MetricFamily{Name: proto.String(name), Type: prom.MetricType_HISTOGRAM.Enum(), Metric: []*prom.Metric{{Label: labels, Histogram: h}}}
}

// flush is a message of edge's listener: n requests, e of them 5xx, all
// within 5 ms.
func flush(n, e float64) []*prom.MetricFamily {
	p := label(labelPrefix, "edge")
	return []*prom.MetricFamily{
		counter("http.downstream_rq_total", n, p),
		counter("http.downstream_rq_xx", e, label(labelCodeClass, "5"), p),
		durationsMS("http.downstream_rq_time", map[int]uint64{2: uint64(n)}, p),
		heartbeat(),
	}
}

// waitReports waits until the receiver has n reports of fleet/id.
func waitReports(t testing.TB, r *Receiver, fleet, id string, n uint64) Report {
	t.Helper()
	var rep Report
	testenv.Poll(t, 10*time.Millisecond, 30*time.Second, "the reports of "+fleet+"/"+id, func() (bool, error) {
		var ok bool
		rep, ok = r.Report(fleet, id)
		return ok && rep.Reports >= n, fmt.Errorf("%d reports, want %d", rep.Reports, n)
	})
	return rep
}

func wantCode(t testing.TB, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

// A proxy's figures are kept by its node id, summed over its flushes.
func TestReceiverKeepsAProxysFigures(t *testing.T) {
	a := newAuthority(t)
	r := New(Options{TrustDomain: testPKI.TrustDomain})
	addr := serveTLS(t, a, r)
	s := open(t, dialAs(t, addr, a, "ns", "edge"))
	for i, m := range []*metricsv3.StreamMetricsMessage{
		{Identifier: node("pod-1", fleet), EnvoyMetrics: flush(10, 4)},
		{EnvoyMetrics: flush(5, 0)},
		// Envoy sends the heartbeat alone when nothing was used.
		{EnvoyMetrics: []*prom.MetricFamily{heartbeat()}},
	} {
		if err := s.Send(m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	rep := waitReports(t, r, fleet, "pod-1", 3)
	got := rep.Scopes[analysis.ScopeHTTP("edge")]
	if got.Requests != 15 || got.Errors5xx != 4 || got.Duration.Count() != 15 || got.Duration.Counts[2] != 15 {
		t.Errorf("edge's figures %+v, want 15 requests, 4 of them 5xx, 15 durations in (1, 5] ms", got)
	}
	if !rep.Connected || rep.Dropped != 0 || len(rep.Scopes) != 1 {
		t.Errorf("report %+v, want connected, nothing dropped, one scope", rep)
	}
	if _, ok := r.Report(fleet, "pod-2"); ok {
		t.Error("a proxy that never reported has a report")
	}
	if err := ended(s); err != nil {
		t.Errorf("closed by the proxy: %v", err)
	}
	testenv.Poll(t, 10*time.Millisecond, 10*time.Second, "the proxy's record to say its stream closed", func() (bool, error) {
		rep, _ := r.Report(fleet, "pod-1")
		return !rep.Connected, nil
	})
}

// A stream is refused unless its certificate is the fleet's its node
// names, and ends when a later message names another node or fleet.
func TestReceiverAuthenticatesAsADS(t *testing.T) {
	a := newAuthority(t)
	r := New(Options{TrustDomain: testPKI.TrustDomain})
	addr := serveTLS(t, a, r)
	asEdge := dialAs(t, addr, a, "ns", "edge")

	wantCode(t, "edge's certificate, claiming fleet other",
		ended(open(t, asEdge), &metricsv3.StreamMetricsMessage{Identifier: node("pod-1", "ns/other"), EnvoyMetrics: flush(10, 10)}),
		codes.PermissionDenied)
	wantCode(t, "no identifier on the first message",
		ended(open(t, asEdge), &metricsv3.StreamMetricsMessage{EnvoyMetrics: flush(10, 10)}),
		codes.InvalidArgument)
	for name, next := range map[string]*metricsv3.StreamMetricsMessage_Identifier{
		"another node":  node("pod-2", fleet),
		"another fleet": node("pod-1", "ns/other"),
	} {
		wantCode(t, name, ended(open(t, asEdge),
			&metricsv3.StreamMetricsMessage{Identifier: node("pod-1", fleet), EnvoyMetrics: flush(1, 0)},
			&metricsv3.StreamMetricsMessage{Identifier: next, EnvoyMetrics: flush(10, 10)}),
			codes.PermissionDenied)
	}
	if _, ok := r.Report("ns/other", "pod-1"); ok {
		t.Error("fleet other has figures from edge's certificate")
	}
	if _, ok := r.Report(fleet, "pod-2"); ok {
		t.Error("pod-2 has figures from pod-1's stream")
	}
	if rep, _ := r.Report(fleet, "pod-1"); rep.Scopes[analysis.ScopeHTTP("edge")].Requests != 2 {
		t.Errorf("pod-1 has %+v, want the 2 requests of its own first messages only", rep.Scopes)
	}
	if got := r.Refused(RefusedIdentity); got != 4 {
		t.Errorf("%d streams refused for their identity, want 4", got)
	}

	// No certificate, another CA's, plaintext: no stream at all.
	stranger := newAuthority(t)
	foreign := dialFrom(t, addr, stranger, a, "ns", "edge")
	noCert := dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, RootCAs: a.Pool(), ServerName: "localhost"})))
	plain := dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	for name, c := range map[string]metricsv3.MetricsServiceClient{"another CA": foreign, "no certificate": noCert, "plaintext": plain} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		s, err := c.StreamMetrics(ctx)
		if err == nil {
			err = ended(s, &metricsv3.StreamMetricsMessage{Identifier: node("pod-9", fleet), EnvoyMetrics: flush(10, 10)})
		}
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Errorf("%s: the stream ended well", name)
		}
	}
	if _, ok := r.Report(fleet, "pod-9"); ok {
		t.Error("an unverified client's figures were kept")
	}

	// A receiver that expects certificates, reached without TLS (a
	// misconfigured server), refuses every stream.
	bare := New(Options{TrustDomain: testPKI.TrustDomain})
	c := dial(t, serve(t, bare), grpc.WithTransportCredentials(insecure.NewCredentials()))
	wantCode(t, "without TLS", ended(open(t, c), &metricsv3.StreamMetricsMessage{Identifier: node("pod-1", fleet), EnvoyMetrics: flush(1, 1)}), codes.PermissionDenied)
	if bare.Refused(RefusedCertificate) != 1 || bare.Proxies() != 0 {
		t.Errorf("refused %d for their certificate, keeps %d proxies; want 1 and none", bare.Refused(RefusedCertificate), bare.Proxies())
	}
}

// Only the inclusion list is kept: other metrics, other labels, other
// response classes and malformed values are dropped and counted.
func TestReceiverKeepsOnlyTheInclusionList(t *testing.T) {
	r := New(Options{})
	addr := serve(t, r)
	s := open(t, dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials())))
	p := label(labelPrefix, "edge")
	c := label(labelCluster, "backend")
	badBuckets := durationsMS("http.downstream_rq_time", map[int]uint64{0: 1}, p)
	badBuckets.Metric[0].Histogram.Bucket[3].UpperBound = proto.Float64(7)
	msg := &metricsv3.StreamMetricsMessage{Identifier: node("pod-1", fleet), EnvoyMetrics: []*prom.MetricFamily{
		counter("http.downstream_rq_total", 7, p),
		counter("cluster.upstream_rq_total", 6, c),
		counter("cluster.upstream_rq_xx", 2, label(labelCodeClass, "5"), c),
		counter("cluster.upstream_rq_rx_reset", 1, c),
		counter("cluster.upstream_cx_connect_fail", 3, c),
		// dropped:
		counter("http.downstream_rq_xx", 5, label(labelCodeClass, "2"), p),
		counter("http.downstream_cx_total", 9, p),
		counter("listener.http.downstream_rq_xx", 9, label(labelCodeClass, "5"), p),
		counter("http.downstream_rq_total", 9, p, label("envoy.worker_id", "1")),
		counter("http.downstream_rq_total", 9),
		counter("http.downstream_rq_total", -1, p),
		counter("http.downstream_rq_total", 1.5, p),
		badBuckets,
		{Name: proto.String("http.downstream_rq_total"), Type: prom.MetricType_GAUGE.Enum(), Metric: []*prom.Metric{{Label: []*prom.LabelPair{p}, Gauge: &prom.Gauge{Value: proto.Float64(9)}}}},
	}}
	if err := s.Send(msg); err != nil {
		t.Fatal(err)
	}
	rep := waitReports(t, r, fleet, "pod-1", 1)
	want := map[string]analysis.Figures{
		analysis.ScopeHTTP("edge"):       {Requests: 7},
		analysis.ScopeCluster("backend"): {Requests: 6, Errors5xx: 2, Resets: 1, ConnectFailures: 3},
	}
	if len(rep.Scopes) != len(want) {
		t.Errorf("scopes %v, want %v", rep.Scopes, want)
	}
	for s, f := range want {
		if rep.Scopes[s] != f {
			t.Errorf("%s: %+v, want %+v", s, rep.Scopes[s], f)
		}
	}
	if rep.Dropped != 9 {
		t.Errorf("%d metrics dropped, want 9", rep.Dropped)
	}
}

// The receiver's bounds: streams at once, proxies kept, scopes per proxy.
func TestReceiverBounds(t *testing.T) {
	first := func(id string, fams ...*prom.MetricFamily) *metricsv3.StreamMetricsMessage {
		return &metricsv3.StreamMetricsMessage{Identifier: node(id, fleet), EnvoyMetrics: append(fams, heartbeat())}
	}
	start := func(t *testing.T, r *Receiver, c metricsv3.MetricsServiceClient, id string) metricsv3.MetricsService_StreamMetricsClient {
		s := open(t, c)
		if err := s.Send(first(id)); err != nil {
			t.Fatal(err)
		}
		waitReports(t, r, fleet, id, 1)
		return s
	}
	t.Run("streams", func(t *testing.T) {
		r := New(Options{MaxStreams: 2})
		c := dial(t, serve(t, r), grpc.WithTransportCredentials(insecure.NewCredentials()))
		start(t, r, c, "pod-1")
		start(t, r, c, "pod-2")
		wantCode(t, "a third stream", ended(open(t, c), first("pod-3")), codes.ResourceExhausted)
		if r.Refused(RefusedStreams) != 1 {
			t.Errorf("%d refused for streams, want 1", r.Refused(RefusedStreams))
		}
	})
	t.Run("scopes", func(t *testing.T) {
		r := New(Options{MaxScopes: 2})
		c := dial(t, serve(t, r), grpc.WithTransportCredentials(insecure.NewCredentials()))
		p := func(name string) *prom.LabelPair { return label(labelPrefix, name) }
		if err := open(t, c).Send(first("pod-1", counter("http.downstream_rq_total", 1, p("a")), counter("http.downstream_rq_total", 1, p("b")),
			counter("http.downstream_rq_total", 1, p("c")))); err != nil {
			t.Fatal(err)
		}
		if rep := waitReports(t, r, fleet, "pod-1", 1); len(rep.Scopes) != 2 || rep.Dropped != 1 {
			t.Errorf("pod-1 keeps %v and dropped %d, want 2 scopes and 1 dropped", rep.Scopes, rep.Dropped)
		}
	})
	t.Run("proxies", func(t *testing.T) {
		// With both kept proxies of a fleet connected, a third of it is
		// refused; once one's stream ended, the third takes its place. A
		// fleet's proxies never evict another fleet's, even when all the
		// receiver keeps are kept.
		const other = "ns/other"
		r := New(Options{MaxProxies: 3, MaxFleetProxies: 2})
		c := dial(t, serve(t, r), grpc.WithTransportCredentials(insecure.NewCredentials()))
		s1 := start(t, r, c, "pod-1")
		start(t, r, c, "pod-2")
		wantCode(t, "a third proxy, both kept connected", ended(open(t, c), first("pod-3")), codes.ResourceExhausted)
		o := open(t, c)
		if err := o.Send(&metricsv3.StreamMetricsMessage{Identifier: node("pod-1", other), EnvoyMetrics: []*prom.MetricFamily{heartbeat()}}); err != nil {
			t.Fatal(err)
		}
		waitReports(t, r, other, "pod-1", 1)
		if err := ended(s1); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "pod-1 to disconnect", func() bool { rep, _ := r.Report(fleet, "pod-1"); return !rep.Connected })
		another := &metricsv3.StreamMetricsMessage{Identifier: node("pod-2", other), EnvoyMetrics: []*prom.MetricFamily{heartbeat()}}
		wantCode(t, "a proxy of another fleet, all kept", ended(open(t, c), another), codes.ResourceExhausted)
		if _, ok := r.Report(fleet, "pod-1"); !ok {
			t.Error("a proxy of another fleet evicted pod-1")
		}
		start(t, r, c, "pod-3")
		if _, ok := r.Report(fleet, "pod-1"); ok || r.Proxies() != 3 {
			t.Errorf("pod-1 kept beside pod-2 and pod-3 (%d proxies), want it evicted", r.Proxies())
		}
		if r.Refused(RefusedFleetProxies) != 1 || r.Refused(RefusedProxies) != 1 {
			t.Errorf("%d refused for the fleet's proxies and %d for all, want 1 and 1", r.Refused(RefusedFleetProxies), r.Refused(RefusedProxies))
		}
	})
	t.Run("grace", func(t *testing.T) {
		// A proxy without a stream, silent for the grace period, is
		// forgotten; one with a stream is kept, however long silent.
		clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
		r := New(Options{Grace: time.Minute, Now: clock.Now})
		c := dial(t, serve(t, r), grpc.WithTransportCredentials(insecure.NewCredentials()))
		s1 := start(t, r, c, "pod-1")
		start(t, r, c, "pod-2")
		if err := ended(s1); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "pod-1 to disconnect", func() bool { rep, _ := r.Report(fleet, "pod-1"); return !rep.Connected })
		clock.Step(59 * time.Second)
		start(t, r, c, "pod-3")
		if _, ok := r.Report(fleet, "pod-1"); !ok {
			t.Error("pod-1 forgotten within the grace period")
		}
		clock.Step(6 * time.Second) // the next sweep: a tenth of the grace period later
		start(t, r, c, "pod-4")
		if _, ok := r.Report(fleet, "pod-1"); ok {
			t.Error("pod-1 kept, without a stream, past the grace period")
		}
		if _, ok := r.Report(fleet, "pod-2"); !ok || r.Proxies() != 3 {
			t.Errorf("pod-2, silent as long but with its stream, forgotten (%d proxies, want 3)", r.Proxies())
		}
	})
}

// A proxy's newer stream replaces its older one, which ends at its next
// message, its figures not kept.
func TestReceiverNewerStreamReplaces(t *testing.T) {
	r := New(Options{})
	addr := serve(t, r)
	c := dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	old := open(t, c)
	if err := old.Send(&metricsv3.StreamMetricsMessage{Identifier: node("pod-1", fleet), EnvoyMetrics: flush(1, 0)}); err != nil {
		t.Fatal(err)
	}
	waitReports(t, r, fleet, "pod-1", 1)
	s := open(t, c)
	if err := s.Send(&metricsv3.StreamMetricsMessage{Identifier: node("pod-1", fleet), EnvoyMetrics: flush(2, 0)}); err != nil {
		t.Fatal(err)
	}
	waitReports(t, r, fleet, "pod-1", 2)
	wantCode(t, "the older stream", ended(old, &metricsv3.StreamMetricsMessage{EnvoyMetrics: flush(100, 100)}), codes.Aborted)
	if rep, _ := r.Report(fleet, "pod-1"); rep.Scopes[analysis.ScopeHTTP("edge")].Requests != 3 || !rep.Connected {
		t.Errorf("pod-1: %+v, want 3 requests, still connected by its newer stream", rep)
	}
}

// Window is a proxy's figures between two reports, silent when nothing
// came in between.
func TestWindow(t *testing.T) {
	e, b := analysis.ScopeHTTP("edge"), analysis.ScopeCluster("backend")
	start := Report{Key: Key{fleet, "pod-1"}, Reports: 4, Scopes: map[string]analysis.Figures{e: {Requests: 10, Errors5xx: 1}}}
	end := Report{Key: Key{fleet, "pod-1"}, Reports: 6, Scopes: map[string]analysis.Figures{e: {Requests: 30, Errors5xx: 11}, b: {Requests: 5}}}
	w := Window(start, end, e)
	if !w.Reported || w.Node != "pod-1" || len(w.Scopes) != 1 || w.Scopes[e] != (analysis.Figures{Requests: 20, Errors5xx: 10}) {
		t.Errorf("window %+v", w)
	}
	if w := Window(start, end); len(w.Scopes) != 2 || w.Scopes[b].Requests != 5 {
		t.Errorf("window of all scopes %+v", w)
	}
	if w := Window(end, end); w.Reported {
		t.Error("a proxy that sent nothing since the start reported")
	}
	// A record made again since the start: measured from nothing.
	again := Report{Key: end.Key, Reports: 1, First: time.Unix(100, 0), Scopes: map[string]analysis.Figures{e: {Requests: 3}}}
	if w := Window(start, again, e); !w.Reported || w.Scopes[e].Requests != 3 {
		t.Errorf("window over a record made again: %+v, want reported, 3 requests", w)
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Poll(t, 10*time.Millisecond, 30*time.Second, what, func() (bool, error) { return cond(), nil })
}

// A flush signals WindowsChanged only while its fleet rolls out (it has
// marks), and at most once per WindowInterval: when its windows are due
// to be figured again.
func TestReceiverSignalsWindows(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	r := New(Options{WindowInterval: 10 * time.Second, Now: clock.Now})
	c := dial(t, serve(t, r), grpc.WithTransportCredentials(insecure.NewCredentials()))
	s := open(t, c)
	sent := uint64(0)
	send := func() {
		t.Helper()
		msg := &metricsv3.StreamMetricsMessage{EnvoyMetrics: flush(1, 0)}
		if sent == 0 {
			msg.Identifier = node("pod-1", fleet)
		}
		if err := s.Send(msg); err != nil {
			t.Fatal(err)
		}
		sent++
		waitReports(t, r, fleet, "pod-1", sent)
	}
	signalled := func() bool {
		select {
		case <-r.WindowsChanged():
			return true
		default:
			return false
		}
	}
	send()
	clock.Step(time.Minute)
	send()
	if signalled() {
		t.Error("signalled for a fleet that does not roll out")
	}
	w := r.Windows(map[string]map[string]string{fleet: {"pod-1": "v1"}})
	if got := w[fleet]["pod-1"]; got == nil || got.Reports != 0 {
		t.Fatalf("pod-1's window %+v, want one just begun", got)
	}
	clock.Step(9 * time.Second)
	send()
	if signalled() {
		t.Error("signalled within the interval")
	}
	clock.Step(time.Second)
	send()
	send()
	if !signalled() {
		t.Fatal("not signalled once the interval passed")
	}
	if signalled() {
		t.Error("signalled twice")
	}
	// The first Reports read since the proxy appeared, which may hold what
	// it served before: its window begins there.
	if w := r.Windows(map[string]map[string]string{fleet: {"pod-1": "v1"}}); w[fleet]["pod-1"].Reports != 0 {
		t.Errorf("pod-1's window %+v, want one just begun", w[fleet]["pod-1"])
	}
	send()
	if signalled() {
		t.Error("signalled just after the windows were figured")
	}
	clock.Step(10 * time.Second)
	send()
	if !signalled() {
		t.Fatal("not signalled once the interval passed again")
	}
	if w := r.Windows(map[string]map[string]string{fleet: {"pod-1": "v1"}}); w[fleet]["pod-1"].Reports != 2 || w[fleet]["pod-1"].Scopes[analysis.ScopeHTTP("edge")].Requests != 2 {
		t.Errorf("pod-1's window %+v, want the 2 reports of one request since the mark", w[fleet]["pod-1"])
	}
	// The fleet no longer rolls out: its marks are dropped.
	r.Windows(nil)
	clock.Step(time.Minute)
	send()
	if signalled() {
		t.Error("signalled for a fleet that no longer rolls out")
	}
}
