package stats

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	fleetid "github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// A real Envoy, started as a fleet's proxy is (the fleet's bootstrap and
// container arguments, its client certificate) with the stats sink added
// to its bootstrap, streams its figures over the xDS cluster to the
// Receiver, served on the same mutual TLS port as ADS: the requests it
// served through a listener to a backend that answers 503 are recorded by
// its node id, listener and cluster, exactly as Envoy counted them, and
// the step they stand for is aborted by analysis. With the stats matcher,
// Envoy sends the inclusion list alone; without it, everything it uses,
// which the Receiver drops.
func TestRealEnvoyReportsItsOwnFigures(t *testing.T) {
	bin := realenvoy.Require(t)
	for _, withMatcher := range []bool{true, false} {
		t.Run(map[bool]string{true: "stats matcher", false: "all stats"}[withMatcher], func(t *testing.T) {
			rig := newRig(t)
			backend := rig.backend503(t)
			ports, err := realenvoy.FreePorts(1)
			if err != nil {
				t.Fatal(err)
			}
			edge := ports[0]
			rig.publish(t, "v1", edge, backend.port)
			p := rig.run(t, bin, "pod-1", fleet, withMatcher)

			// Envoy serves the published listener once the backend itself
			// answers through it; until then, Envoy answers 503 itself.
			// Every request that was answered counts.
			ctx := context.Background()
			var sent, fromBackend int
			get := func() (string, error) {
				status, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/", edge))
				if err == nil {
					sent++
					if status != http.StatusServiceUnavailable {
						return body, fmt.Errorf("status %d", status)
					}
				}
				return body, err
			}
			testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "Envoy to route to the backend", func() (bool, error) {
				body, _ := get()
				return body == backendBody, nil
			})
			for range 20 {
				if body, err := get(); err != nil || body != backendBody {
					t.Fatalf("through Envoy: %q, %v", body, err)
				}
			}
			fromBackend = int(backend.served.Load())

			// Envoy's own count, through its admin interface, and the
			// receiver's agree with what was sent.
			if got, err := p.Stat(ctx, "http.edge.downstream_rq_5xx"); err != nil || got != int64(sent) {
				t.Fatalf("Envoy counted %d 5xx on edge (%v), want the %d sent", got, err, sent)
			}
			var rep Report
			testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "the receiver to hold pod-1's requests", func() (bool, error) {
				rep, _ = rig.r.Report(fleet, "pod-1")
				e, c := rep.Scopes[analysis.ScopeHTTP("edge")], rep.Scopes[analysis.ScopeCluster("backend")]
				return e.Requests >= uint64(sent) && c.Requests >= uint64(fromBackend) && e.Duration.Count() >= uint64(sent), nil
			})
			// Flushes after the traffic add nothing.
			after := rep.Reports
			testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "two more flushes of pod-1", func() (bool, error) {
				rep, _ = rig.r.Report(fleet, "pod-1")
				return rep.Reports >= after+2, nil
			})
			e, c := rep.Scopes[analysis.ScopeHTTP("edge")], rep.Scopes[analysis.ScopeCluster("backend")]
			t.Logf("pod-1 reported %d times: edge %d requests, %d 5xx, %d durations, p99 %v ms; backend %d requests, %d 5xx; %d metrics dropped; messages %s",
				rep.Reports, e.Requests, e.Errors5xx, e.Duration.Count(), p99(e), c.Requests, c.Errors5xx, rep.Dropped, rig.sizes())
			if e.Requests != uint64(sent) || e.Errors5xx != uint64(sent) || e.Duration.Count() != uint64(sent) {
				t.Errorf("edge: %d requests, %d 5xx, %d durations; want the %d sent, all 503", e.Requests, e.Errors5xx, e.Duration.Count(), sent)
			}
			if c.Requests != uint64(fromBackend) || c.Errors5xx != uint64(fromBackend) || c.ConnectFailures != 0 {
				t.Errorf("backend: %+v; want the %d requests the backend served, all 503", c, fromBackend)
			}
			if cx, err := p.Stat(ctx, "cluster.xds_cluster.upstream_cx_total"); err == nil {
				t.Logf("Envoy opened %d connection(s) to the xDS cluster, for ADS and the stats stream", cx)
			}
			if !rep.Connected {
				t.Error("pod-1's stream is not open")
			}
			if withMatcher && rep.Dropped != 0 {
				t.Errorf("with the stats matcher, %d metrics were dropped: Envoy sent more than the inclusion list", rep.Dropped)
			}
			if !withMatcher && rep.Dropped == 0 {
				t.Error("without the stats matcher, nothing was dropped: Envoy sends every stat it used")
			}
			// A proxy of the step serving this aborts it, on its own figures.
			v := analysis.Judge(analysis.Input{
				Step:    []analysis.Proxy{Window(Report{}, rep, analysis.ScopeHTTP("edge"))},
				Elapsed: time.Second, Bake: time.Minute,
				Thresholds: analysis.Thresholds{ErrorRatio: analysis.Limit{Max: 0.05}, MinRequests: 10},
			})
			if v.Outcome != analysis.Abort || v.Findings[0].Proxy != "pod-1" || v.Findings[0].Metric != analysis.MetricErrorRatio || v.Findings[0].Value != 1 {
				t.Errorf("verdict %+v, want an abort on pod-1's 5xx ratio of 1", v)
			}
		})
	}
}

// A real Envoy whose node names another fleet than its certificate's is
// refused: its stats stream ends, and nothing of it is kept.
func TestRealEnvoyOfAnotherFleetIsRefused(t *testing.T) {
	bin := realenvoy.Require(t)
	rig := newRig(t)
	rig.run(t, bin, "pod-1", "ns/other", true)
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "the receiver to refuse the proxy", func() (bool, error) {
		return rig.r.Refused(RefusedIdentity) >= 2, nil
	})
	if n := rig.r.Refused(RefusedCertificate); n != 0 {
		t.Errorf("%d streams refused for their certificate, want none: the certificate is valid, the node is not its fleet's", n)
	}
	for _, f := range []string{"ns/other", fleet} {
		if _, ok := rig.r.Report(f, "pod-1"); ok {
			t.Errorf("%s/pod-1 has figures", f)
		}
	}
	if n := rig.r.Proxies(); n != 0 {
		t.Errorf("the receiver keeps %d proxies, want none", n)
	}
}

func p99(f analysis.Figures) string {
	q, ok := f.Duration.Quantile(0.99)
	if !ok {
		return "none"
	}
	return fmt.Sprintf("%.2f", q)
}

// rig is the operator's xDS server (server.Server), over mutual TLS with
// the rig's CA, with the Receiver added to it (AddService and SetStats, as
// the operator runs it): ADS and the stats streams on one port, and the
// windows of a rolling fleet's proxies in the server's report.
type rig struct {
	a   pki.Authority
	r   *Receiver
	srv *server.Server
	// addr is the server's address.
	addr string
	// keep are the stats, beside the inclusion list, that the stats
	// matcher of the Envoys run keeps (Matcher).
	keep []string

	// What the stats streams carried: the first message of each (which
	// names the node, with Envoy's build and extensions), and the others.
	mu                    sync.Mutex
	firsts, firstBytes    int
	messages, bytes       int
	families, maxFamilies int
}

func newRig(t *testing.T) *rig {
	t.Helper()
	g := &rig{a: xdstest.NewAuthority(t)}
	// The rig's Envoys flush every second: so are the windows figured.
	g.r = New(Options{TrustDomain: testPKI.TrustDomain, WindowInterval: time.Second, Own: BootstrapScopes("xds_cluster")})
	g.srv = server.New("127.0.0.1:0", logr.Discard())
	g.srv.SetTLS(xdstest.ServerTLS(t, g.a), testPKI.TrustDomain)
	g.srv.AddService(measuring{Receiver: g.r, g: g})
	g.srv.SetStats(g.r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the xDS server: %v", err)
		}
	})
	addr, err := g.srv.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.addr = addr.String()
	return g
}

// measuring is the rig's Receiver as it is served: it counts the stats
// messages, their size and metric families, and hands them on.
type measuring struct {
	*Receiver
	g *rig
}

func (m measuring) Register(s *grpc.Server) { metricsv3.RegisterMetricsServiceServer(s, m) }

func (m measuring) StreamMetrics(s metricsv3.MetricsService_StreamMetricsServer) error {
	return m.Receiver.StreamMetrics(&measured{MetricsService_StreamMetricsServer: s, g: m.g})
}

type measured struct {
	metricsv3.MetricsService_StreamMetricsServer
	g    *rig
	seen bool
}

func (m *measured) Recv() (*metricsv3.StreamMetricsMessage, error) {
	msg, err := m.MetricsService_StreamMetricsServer.Recv()
	if err == nil {
		m.g.mu.Lock()
		if !m.seen {
			m.seen = true
			m.g.firsts++
			m.g.firstBytes += proto.Size(msg)
		} else {
			m.g.messages++
			m.g.bytes += proto.Size(msg)
			m.g.families += len(msg.GetEnvoyMetrics())
			m.g.maxFamilies = max(m.g.maxFamilies, len(msg.GetEnvoyMetrics()))
		}
		m.g.mu.Unlock()
	}
	return msg, err
}

func (g *rig) sizes() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.messages == 0 || g.firsts == 0 {
		return "none"
	}
	return fmt.Sprintf("first of a stream %d bytes; then %d of %d bytes and %d metric families on average, %d at most",
		g.firstBytes/g.firsts, g.messages, g.bytes/g.messages, g.families/g.messages, g.maxFamilies)
}

// backend is a Go HTTP server that answers every request 503.
type backend struct {
	port   uint32
	served atomic.Int64
}

const backendBody = "backend says 503"

func (g *rig) backend503(t *testing.T) *backend {
	t.Helper()
	return backendAnswering(t, http.StatusServiceUnavailable, backendBody)
}

// backendAnswering is a Go HTTP server that answers every request status,
// with body.
func backendAnswering(t *testing.T, status int, body string) *backend {
	t.Helper()
	b := &backend{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b.served.Add(1)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	b.port = uint32(lis.Addr().(*net.TCPAddr).Port)
	return b
}

// publish serves the fleet, over ADS, version of a listener edge on
// 127.0.0.1:port (stat prefix edge) that routes everything to cluster
// backend, on 127.0.0.1:backendPort.
func (g *rig) publish(t *testing.T, version string, port, backendPort uint32) {
	t.Helper()
	if err := g.srv.SetFleet(context.Background(), fleet, version, edgeResources(port, "backend", backendPort)); err != nil {
		t.Fatal(err)
	}
}

// edgeResources are a listener edge on 127.0.0.1:port (stat prefix edge)
// that routes everything to the static cluster named cluster, on
// 127.0.0.1:backendPort.
func edgeResources(port uint32, cluster string, backendPort uint32) map[string][]types.Resource {
	address := func(port uint32) *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
	}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "edge",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "edge",
			VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}}},
	}
	return map[string][]types.Resource{
		resourcev3.ListenerType: {&listenerv3.Listener{Name: "edge", Address: address(port),
			FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)}}}}}}},
		resourcev3.ClusterType: {&clusterv3.Cluster{Name: cluster, ConnectTimeout: durationpb.New(time.Second),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: address(backendPort)}}}}}}}}},
	}
}

// run starts Envoy as pod node of fleetName, from the fleet's bootstrap
// (mutual TLS to the rig, with a client certificate of fleet ns/edge) with
// the stats sink added (flushed every second; with the stats matcher when
// withMatcher), and its container's arguments. Envoy is stopped when the
// test ends.
func (g *rig) run(t *testing.T, bin, node, fleetName string, withMatcher bool) *realenvoy.Process {
	t.Helper()
	xds := proxy.XDSServer{ClusterName: "xds_cluster", Host: "localhost", Port: 1, MutualTLS: true}
	b := proxy.Bootstrap(xds, proxy.Overload{})
	matcher := Matcher(g.keep...)
	if !withMatcher {
		matcher = nil
	}
	if err := AddSink(b, xds.ClusterName, time.Second, matcher); err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.IssueClient(g.a, fleetid.ID{Namespace: "ns", Name: "edge"}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := realenvoy.FleetPod(b, xds, fleetName, node, leaf.Cert, leaf.Key, g.a.Bundle())
	if err != nil {
		t.Fatal(err)
	}
	log := &realenvoy.Log{}
	p, err := realenvoy.Run(bin, pod, t.TempDir(), g.addr, false, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("Envoy's log:\n%s", log.String())
		}
	})
	return p
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
