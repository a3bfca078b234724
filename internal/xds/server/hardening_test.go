package server

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// eventually polls cond until it holds; the bound only ends a test that
// will not pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Poll(t, 10*time.Millisecond, time.Minute, what, func() (bool, error) { return cond(), nil })
}

// refusals reads the refusal counter of reason.
func refusals(t *testing.T, reason string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := metricRefused.WithLabelValues(reason).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// wantCode fails unless err is a gRPC status with code.
func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: got %v, want %s", what, err, code)
	}
}

// A client that pipelines 2000 requests for types the server does not serve
// is refused at the first one past maxUnservedTypes, and does not hold up
// another fleet's push.
func TestUnknownTypesAreRefused(t *testing.T) {
	ctx := context.Background()
	s, addr := startServer(t)
	const victim, other = "ns/victim", "ns/other"
	for _, f := range []string{victim, other} {
		if err := s.SetFleet(ctx, f, "v1", clusters("a")); err != nil {
			t.Fatal(err)
		}
	}
	p := xdstest.Connect(t, xdstest.Dial(t, addr), other, "pod-1", resourcev3.ClusterType)
	if _, err := p.Next(""); err != nil {
		t.Fatal(err)
	}
	refused := refusals(t, refusedType)

	// The hostile client claims a published fleet and never reads. Each
	// request names another type, at a version the cache does not have: a
	// cache that took them would answer each one on the stream's channel.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hostile, err := xdstest.Dial(t, addr).StreamAggregatedResources(hctx)
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan int, 1)
	started := make(chan struct{})
	go func() {
		n := 0
		for ; n < 2000; n++ {
			if n == 100 {
				close(started)
			}
			req := &discoveryv3.DiscoveryRequest{TypeUrl: fmt.Sprintf("type.googleapis.com/hostile.T%d", n), VersionInfo: "x"}
			if n == 0 {
				req.Node = &corev3.Node{Id: "hostile", Cluster: victim}
			}
			if hostile.Send(req) != nil {
				break // the server ended the stream
			}
		}
		if n < 100 {
			close(started)
		}
		sent <- n
	}()
	<-started

	// The other fleet's push, while the hostile requests arrive.
	begin := time.Now()
	if err := s.SetFleet(ctx, other, "v2", clusters("a", "b")); err != nil {
		t.Fatal(err)
	}
	resp, err := p.Next("")
	if err != nil {
		t.Fatal(err)
	}
	delay := time.Since(begin)
	if resp.GetVersionInfo() != s.TypeVersion(other, resourcev3.ClusterType) || len(resp.GetResources()) != 2 {
		t.Fatalf("the other fleet got version %s with %d clusters, want v2's two", resp.GetVersionInfo(), len(resp.GetResources()))
	}
	_, err = hostile.Recv()
	wantCode(t, "the hostile stream", err, codes.ResourceExhausted)
	cancel()
	n := <-sent
	t.Logf("the other fleet's push reached its proxy %v after publication, during %d hostile requests sent", delay, n)
	if got := refusals(t, refusedType) - refused; got != 1 {
		t.Errorf("%v refusals counted, want 1: the stream ends at its first type past maxUnservedTypes", got)
	}
	// The victim fleet is still served.
	q := xdstest.Connect(t, xdstest.Dial(t, addr), victim, "pod-2", resourcev3.ClusterType)
	if _, err := q.Next(""); err != nil {
		t.Fatal(err)
	}
}

func secrets(names ...string) map[string][]types.Resource {
	r := clusters("a")
	for _, n := range names {
		r[resourcev3.SecretType] = append(r[resourcev3.SecretType], &tlsv3.Secret{Name: n})
	}
	return r
}

// A wildcard subscription to secrets is refused, over both protocols; a
// subscription by name gets the named secret alone.
func TestWildcardSecretsAreRefused(t *testing.T) {
	ctx := context.Background()
	s, addr := startServer(t)
	mustPublish(t, s, "v1", secrets("s1", "s2"))
	c := xdstest.Dial(t, addr)
	node := &corev3.Node{Id: "pod", Cluster: fleet}
	sotw := func(names ...string) (*discoveryv3.DiscoveryResponse, error) {
		st, err := c.StreamAggregatedResources(ctx)
		if err != nil {
			return nil, err
		}
		defer st.CloseSend() //nolint:errcheck // the test is done with it
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.SecretType, ResourceNames: names}); err != nil {
			return nil, err
		}
		return st.Recv()
	}
	delta := func(names ...string) (*discoveryv3.DeltaDiscoveryResponse, error) {
		st, err := c.DeltaAggregatedResources(ctx)
		if err != nil {
			return nil, err
		}
		defer st.CloseSend() //nolint:errcheck // the test is done with it
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resourcev3.SecretType, ResourceNamesSubscribe: names}); err != nil {
			return nil, err
		}
		return st.Recv()
	}
	refused := refusals(t, refusedWildcardSecret)
	_, err := sotw()
	wantCode(t, "sotw without names", err, codes.InvalidArgument)
	_, err = sotw("*")
	wantCode(t, "sotw *", err, codes.InvalidArgument)
	_, err = sotw("s1", "*")
	wantCode(t, "sotw s1 and *", err, codes.InvalidArgument)
	_, err = delta()
	wantCode(t, "delta without names", err, codes.InvalidArgument)
	_, err = delta("*")
	wantCode(t, "delta *", err, codes.InvalidArgument)
	if got := refusals(t, refusedWildcardSecret) - refused; got != 5 {
		t.Errorf("%v wildcard refusals counted, want 5", got)
	}

	resp, err := sotw("s1")
	if names, _ := xdstest.Names(resp.GetResources()); err != nil || !slices.Equal(names, []string{"s1"}) {
		t.Fatalf("sotw s1: %v, %v", resp, err)
	}
	dresp, err := delta("s1")
	if err != nil || len(dresp.GetResources()) != 1 || dresp.GetResources()[0].GetName() != "s1" {
		t.Fatalf("delta s1: %v, %v", dresp, err)
	}
}

// dial connects for the test's duration, and returns the connection too.
func dial(t *testing.T, addr string) (*grpc.ClientConn, discoveryv3.AggregatedDiscoveryServiceClient) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
}

// A connection gets at most MaxStreamsPerConnection streams at once; another
// waits until one ends.
func TestStreamsPerConnectionLimit(t *testing.T) {
	ctx := context.Background()
	s, addr := startServerWith(t, func(s *Server) {
		l := DefaultLimits
		l.MaxConnections, l.MaxStreamsPerConnection = 10, 2
		if err := s.SetLimits(l); err != nil {
			t.Fatal(err)
		}
	})
	mustPublish(t, s, "v1", clusters("a"))
	_, c := dial(t, addr)
	var open []*xdstest.Proxy
	for i := range 2 {
		p := xdstest.Connect(t, c, fleet, fmt.Sprintf("pod-%d", i), resourcev3.ClusterType)
		if _, err := p.Next(""); err != nil {
			t.Fatal(err)
		}
		open = append(open, p)
	}
	// A third stream cannot start while two are open: its start ends
	// with its context, whatever the wait.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if st, err := c.StreamAggregatedResources(short); err == nil {
		err = st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "pod-3", Cluster: fleet}, TypeUrl: resourcev3.ClusterType})
		if err == nil {
			_, err = st.Recv()
		}
		wantCode(t, "a third stream", err, codes.DeadlineExceeded)
	} else {
		wantCode(t, "a third stream", err, codes.DeadlineExceeded)
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 2, Acked: 2})

	// One ends: a third one starts.
	if err := open[0].Stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	p := xdstest.Connect(t, c, fleet, "pod-3", resourcev3.ClusterType)
	if _, err := p.Next(""); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 2, Acked: 2})
}

// The server holds at most MaxConnections connections; one more is closed
// at once, and a client gets in again once a connection ends.
func TestConnectionLimit(t *testing.T) {
	ctx := context.Background()
	s, addr := startServerWith(t, func(s *Server) {
		l := DefaultLimits
		l.MaxConnections, l.MaxStreamsPerConnection = 2, 10
		if err := s.SetLimits(l); err != nil {
			t.Fatal(err)
		}
	})
	mustPublish(t, s, "v1", clusters("a"))
	var conns []*grpc.ClientConn
	for i := range 2 {
		conn, c := dial(t, addr)
		if _, err := xdstest.Connect(t, c, fleet, fmt.Sprintf("pod-%d", i), resourcev3.ClusterType).Next(""); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	refused := refusals(t, refusedConnection)
	// try opens a stream on a new connection and returns its first response's error.
	try := func() error {
		conn, c := dial(t, addr)
		defer conn.Close()
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		st, err := c.StreamAggregatedResources(sctx)
		if err != nil {
			return err
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "pod-x", Cluster: fleet}, TypeUrl: resourcev3.ClusterType}); err != nil {
			_, err = st.Recv() // the stream's status
			return err
		}
		_, err = st.Recv()
		return err
	}
	wantCode(t, "a third connection", try(), codes.Unavailable)
	if got := refusals(t, refusedConnection) - refused; got < 1 {
		t.Errorf("%v connections refused, want at least 1", got)
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 2, Acked: 2})

	conns[0].Close()
	eventually(t, "a connection to be let in once one ended", func() bool { return try() == nil })
}

// Limits that allow nothing are refused.
func TestLimitsCheck(t *testing.T) {
	d := DefaultLimits
	for _, change := range []func(*Limits){
		func(l *Limits) { l.MaxConnections = 0 },
		func(l *Limits) { l.MaxStreamsPerConnection = 0 },
		func(l *Limits) { l.MaxStreamsPerConnection = math.MaxUint32 + 1 },
		func(l *Limits) { l.HandshakeTimeout = 0 },
		func(l *Limits) { l.MaxConnectionsPerSource = 0 },
		func(l *Limits) { l.HandshakesPerSecondPerSource = 0 },
		func(l *Limits) { l.MaxRequestBytes = 1023 },
		func(l *Limits) { l.MaxNamesPerType = 0 },
	} {
		l := d
		change(&l)
		if err := New("127.0.0.1:0", logr.Discard()).SetLimits(l); err == nil {
			t.Errorf("%+v was accepted", l)
		}
	}
	if err := New("127.0.0.1:0", logr.Discard()).SetLimits(DefaultLimits); err != nil {
		t.Errorf("the default limits: %v", err)
	}
}

// A NACK's error_detail is cut to MaxNACKDetail as it arrives.
func TestNACKDetailIsCut(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a"))
	p := xdstest.Connect(t, xdstest.Dial(t, addr), fleet, "pod-1", resourcev3.ClusterType)
	if _, err := p.Next(""); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, s, "v2", clusters("a", "b"))
	huge := "cluster b: " + strings.Repeat("é", 3<<19) // 3 MiB
	if _, err := p.Next(huge); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NACK", func() bool { return s.Tracker().Counts(fleet, "v2").Nacked == 1 })
	got := s.Tracker().Counts(fleet, "v2").LastNACK
	if len(got) > resource.MaxNACKDetail || !strings.HasPrefix(huge, strings.TrimSuffix(got, "…")) || len(got) < resource.MaxNACKDetail-8 {
		t.Errorf("the NACK's detail is kept as %d bytes (%.20q…), want at most %d, a prefix of it", len(got), got, resource.MaxNACKDetail)
	}
}

// fleetSeries lists the xDS metrics that have a series for fleet.
func fleetSeries(t *testing.T, fleet string) []string {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "kube_envoy_controller_xds_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "fleet" && l.GetValue() == fleet {
					out = append(out, f.GetName())
				}
			}
		}
	}
	return out
}

// A stream that claims a fleet that is not published gets nothing and
// leaves no trace but itself: no cache entry, no metric series, no report.
// Once the fleet is published it is served; once the fleet is cleared, its
// series and entries go, and the stream waits for the fleet again.
func TestOnlyPublishedFleetsAreServedAndCounted(t *testing.T) {
	ctx := context.Background()
	s, addr := startServer(t)
	const ghost = "ns/ghost"
	t.Cleanup(func() { s.ClearFleet(ghost) }) // metric series are global
	p := xdstest.Connect(t, xdstest.Dial(t, addr), ghost, "pod-1", resourcev3.ClusterType)
	eventually(t, "the stream's watch to wait", func() bool { return s.cache.Waiting(ghost) == 1 })
	unpublished := func(when string) {
		t.Helper()
		if s.cache.Published(ghost) != nil {
			t.Errorf("%s: the cache serves %s", when, ghost)
		}
		if series := fleetSeries(t, ghost); len(series) > 0 {
			t.Errorf("%s: metric series for %s: %v", when, ghost, series)
		}
		if fleets := s.Tracker().Fleets(); slices.Contains(fleets, ghost) {
			t.Errorf("%s: the tracker reports %s", when, ghost)
		}
	}
	unpublished("before publication")

	if err := s.SetFleet(ctx, ghost, "v1", clusters("a")); err != nil {
		t.Fatal(err)
	}
	resp, err := p.Next("")
	if err != nil || resp.GetVersionInfo() != s.TypeVersion(ghost, resourcev3.ClusterType) {
		t.Fatalf("after publication: %v, %v", resp.GetVersionInfo(), err)
	}
	eventually(t, "the ACK to count", func() bool { return s.Tracker().Counts(ghost, "v1") == ProxyCounts{Connected: 1, Acked: 1} })
	if series := fleetSeries(t, ghost); len(series) < 3 { // connected, pushes, acks
		t.Errorf("series once published: %v", series)
	}
	if s.cache.Published(ghost) == nil || !slices.Equal(s.Tracker().Fleets(), []string{ghost}) {
		t.Errorf("once published: served %v, tracker fleets %v", s.cache.Published(ghost) != nil, s.Tracker().Fleets())
	}

	s.ClearFleet(ghost)
	unpublished("after ClearFleet")
	eventually(t, "the stream's new watch to wait again", func() bool { return s.cache.Waiting(ghost) == 1 })

	// Published again, the fleet reaches the stream that stayed open.
	if err := s.SetFleet(ctx, ghost, "v2", clusters("a", "b")); err != nil {
		t.Fatal(err)
	}
	resp, err = p.Next("")
	if err != nil || len(resp.GetResources()) != 2 {
		t.Fatalf("published again: %v, %v", resp, err)
	}
}

// Healthy fails while the snapshot cache is stuck, and after the serve loop ended.
func TestHealthy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := New("127.0.0.1:0", logr.Discard())
	s.stuckAfter = 100 * time.Millisecond
	if err := s.Healthy(nil); err != nil {
		t.Errorf("before Start: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	if _, err := s.Addr(ctx); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, s, "v1", clusters("a"))
	eventually(t, "a healthy server", func() bool { return s.Healthy(nil) == nil })
	// Settle: every probe answers.
	for range 5 {
		if err := s.Healthy(nil); err != nil {
			t.Fatalf("a serving server: %v", err)
		}
		time.Sleep(s.stuckAfter)
	}

	// Wedge a fleet's lock, as a publication stuck under it would: nothing
	// in the cache waits while it holds one, but the check is there for
	// what nobody foresaw.
	release := s.cache.Occupy(fleet)
	eventually(t, "the health check to fail", func() bool {
		err := s.Healthy(nil)
		if err != nil {
			t.Logf("while the cache is stuck: %v", err)
		}
		return err != nil
	})
	// Another fleet is published all the same: locks are per fleet.
	if err := s.SetFleet(ctx, "ns/other", "v1", clusters("b")); err != nil {
		t.Fatal(err)
	}
	if s.TypeVersion("ns/other", resourcev3.ClusterType) == "" {
		t.Fatal("the other fleet was not published while one fleet was stuck")
	}
	// The stuck fleet's own publication waits for it.
	published := make(chan error, 1)
	go func() { published <- s.SetFleet(ctx, fleet, "v2", clusters("b")) }()
	release() // unstick it
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	eventually(t, "the health check to pass again", func() bool { return s.Healthy(nil) == nil })

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Healthy(nil); err == nil {
		t.Error("a server whose serve loop ended passed the health check")
	}
}

// A stream that never reads what it is sent holds nothing another stream
// needs: its fleet is published again and again, and another fleet's proxy
// is served, while its responses pile up unread.
func TestSilentStreamHoldsNothing(t *testing.T) {
	ctx := context.Background()
	s, addr := startServer(t)
	const silent = "ns/silent"
	big := func(g int) map[string][]types.Resource {
		var rs []types.Resource
		for i := range 500 {
			c := cluster(fmt.Sprintf("c%03d-%s", i, strings.Repeat("x", 200)), g)
			rs = append(rs, c)
		}
		return map[string][]types.Resource{resourcev3.ClusterType: rs}
	}
	if err := s.SetFleet(ctx, silent, "v0", big(0)); err != nil {
		t.Fatal(err)
	}
	// The silent client subscribes to every type and reads nothing: its
	// first response alone fills gRPC's window.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := xdstest.Dial(t, addr).StreamAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, kind := range resource.PushOrder {
		k := resource.Kinds[kind]
		req := &discoveryv3.DiscoveryRequest{TypeUrl: k.TypeURL}
		if k.ByName {
			req.ResourceNames = []string{"s"}
		}
		if i == 0 {
			req.Node = &corev3.Node{Id: "silent", Cluster: silent}
		}
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	p := xdstest.Connect(t, xdstest.Dial(t, addr), fleet, "pod", resourcev3.ClusterType)
	for g := 1; g <= 20; g++ {
		if err := s.SetFleet(ctx, silent, fmt.Sprintf("v%d", g), big(g)); err != nil {
			t.Fatal(err)
		}
		mustPublish(t, s, fmt.Sprintf("v%d", g), clusters("a", fmt.Sprintf("b%d", g)))
		if resp, err := p.Next(""); err != nil || resp.GetVersionInfo() != s.TypeVersion(fleet, resourcev3.ClusterType) {
			t.Fatalf("publication %d: the other fleet's proxy got %v, %v", g, resp.GetVersionInfo(), err)
		}
	}
}

// A state-of-the-world stream and a delta stream are two proxies, though
// go-control-plane numbers each kind from 1: each keeps its node, and each
// is counted, until it closes.
func TestSotwAndDeltaStreamsAreToldApart(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a"))
	c := xdstest.Dial(t, addr)
	p := xdstest.Connect(t, c, fleet, "pod-sotw", resourcev3.ClusterType)
	if _, err := p.Next(""); err != nil {
		t.Fatal(err)
	}
	d := xdstest.OpenDelta(t, c, fleet, "pod-delta")
	if err := d.Subscribe(resourcev3.ClusterType); err != nil {
		t.Fatal(err)
	}
	resp, err := d.Recv()
	if err != nil {
		t.Fatalf("the delta stream: %v", err)
	}
	if err := d.Ack(resp); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 2, Acked: 2})
	nodes := func() []string {
		var out []string
		for _, ps := range s.Tracker().Proxies() {
			out = append(out, ps.Node)
		}
		return out
	}
	if got := nodes(); !slices.Equal(got, []string{"pod-delta", "pod-sotw"}) {
		t.Errorf("the tracker knows %v", got)
	}
	if err := p.Stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 1, Acked: 1})
	if got := nodes(); !slices.Equal(got, []string{"pod-delta"}) {
		t.Errorf("once the sotw stream closed, the tracker knows %v", got)
	}
}
