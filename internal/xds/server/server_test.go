package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

const fleet = "ns/edge"

// startServer runs a Server on a loopback port for the test's duration.
func startServer(t *testing.T) (*Server, string) {
	t.Helper()
	return startServerWith(t, nil)
}

// startServerWith is startServer with configure applied to the server before it starts.
func startServerWith(t *testing.T, configure func(*Server)) (*Server, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := New("127.0.0.1:0", logr.Discard())
	if configure != nil {
		configure(s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	addr, err := s.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server stopped with %v", err)
		}
	})
	return s, addr.String()
}

// mustPublish publishes resources to the test fleet as version.
func mustPublish(t *testing.T, s *Server, version string, resources map[string][]types.Resource) {
	t.Helper()
	if err := s.SetFleet(context.Background(), fleet, version, resources); err != nil {
		t.Fatal(err)
	}
}

func clusters(names ...string) map[string][]types.Resource {
	var rs []types.Resource
	for _, n := range names {
		rs = append(rs, &clusterv3.Cluster{Name: n, ConnectTimeout: durationpb.New(time.Second)})
	}
	return map[string][]types.Resource{resourcev3.ClusterType: rs}
}

func waitCounts(t *testing.T, s *Server, version string, want ProxyCounts) {
	t.Helper()
	// No speed goal: a bound that only ends a test that will not pass, with
	// hundreds of streams under the race detector on a small machine.
	testenv.Poll(t, 10*time.Millisecond, 2*time.Minute, "the counts of "+version, func() (bool, error) {
		got := s.Tracker().Counts(fleet, version)
		return got == want, fmt.Errorf("counts %+v, want %+v", got, want)
	})
}

func TestSotwAckAndNack(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a"))
	p := xdstest.Connect(t, xdstest.Dial(t, addr), fleet, "pod-1", resourcev3.ClusterType)
	resp, err := p.Next("")
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetVersionInfo() != s.TypeVersion(fleet, resourcev3.ClusterType) || len(resp.GetResources()) != 1 {
		t.Fatalf("response = version %s, %d resources", resp.GetVersionInfo(), len(resp.GetResources()))
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 1, Acked: 1})

	// Unchanged content is not pushed again, even under a new version: the
	// content hash, not the label, decides.
	mustPublish(t, s, "v1-again", clusters("a"))
	mustPublish(t, s, "v2", clusters("a", "b"))
	resp, err = p.Next("cluster b: bad")
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetVersionInfo() != s.TypeVersion(fleet, resourcev3.ClusterType) {
		t.Fatalf("got version %s after v1, want v2 (the unchanged content was pushed again?)", resp.GetVersionInfo())
	}
	waitCounts(t, s, "v2", ProxyCounts{Connected: 1, Nacked: 1, LastNACK: "cluster b: bad", LastNACKType: resourcev3.ClusterType, LastNACKNode: "pod-1"})
	// The proxy still runs v1.
	waitCounts(t, s, "v1", ProxyCounts{Connected: 1, Acked: 1})
}

func TestDeltaAckAndNack(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a"))
	st := xdstest.ConnectDelta(t, xdstest.Dial(t, addr), fleet, "pod-1", resourcev3.ClusterType)
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResources()) != 1 || resp.GetResources()[0].GetName() != "a" {
		t.Fatalf("first delta response = %v", resp.GetResources())
	}
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 1, Acked: 1})

	// Delta sends only what changed: the new cluster b, not a again.
	mustPublish(t, s, "v2", clusters("a", "b"))
	resp, err = st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResources()) != 1 || resp.GetResources()[0].GetName() != "b" {
		t.Fatalf("second delta response = %v, want only cluster b", resp.GetResources())
	}
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce(),
		ErrorDetail: &statuspb.Status{Code: 3, Message: "no"}}); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, s, "v2", ProxyCounts{Connected: 1, Nacked: 1, LastNACK: "no", LastNACKType: resourcev3.ClusterType, LastNACKNode: "pod-1"})
}

// 500 concurrent ADS streams of one fleet all receive and ACK a new version.
func TestManyProxies(t *testing.T) {
	const n = 500
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a"))
	// A few connections carry the streams, as many proxies behind few nodes would.
	var conns []discoveryv3.AggregatedDiscoveryServiceClient
	for range 10 {
		conns = append(conns, xdstest.Dial(t, addr))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		p := xdstest.Connect(t, conns[i%len(conns)], fleet, fmt.Sprintf("pod-%d", i), resourcev3.ClusterType)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 { // v1, then v2
				if _, err := p.Next(""); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: n, Acked: n})
	mustPublish(t, s, "v2", clusters("a", "b"))
	waitCounts(t, s, "v2", ProxyCounts{Connected: n, Acked: n})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A closed stream is no longer counted.
func TestDisconnect(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a"))
	p := xdstest.Connect(t, xdstest.Dial(t, addr), fleet, "pod-1", resourcev3.ClusterType)
	if _, err := p.Next(""); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 1, Acked: 1})
	if err := p.Stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, s, "v1", ProxyCounts{})
}

// A rejected version is not sent straight back to the proxy that rejected
// it (which would reject it again, in a loop): its next response is the
// next version.
func TestNoResendAfterNack(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a"))
	p := xdstest.Connect(t, xdstest.Dial(t, addr), fleet, "pod-1", resourcev3.ClusterType)
	if _, err := p.Next(""); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, s, "v2", clusters("a", "bad"))
	if resp, err := p.Next("bad cluster"); err != nil || resp.GetVersionInfo() != s.TypeVersion(fleet, resourcev3.ClusterType) {
		t.Fatalf("got %v, %v; want v2", resp.GetVersionInfo(), err)
	}
	waitCounts(t, s, "v2", ProxyCounts{Connected: 1, Nacked: 1, LastNACK: "bad cluster", LastNACKType: resourcev3.ClusterType, LastNACKNode: "pod-1"})
	mustPublish(t, s, "v3", clusters("a", "good"))
	resp, err := p.Next("")
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetVersionInfo() != s.TypeVersion(fleet, resourcev3.ClusterType) {
		t.Errorf("after a NACK of v2 the proxy was sent %s, want v3", resp.GetVersionInfo())
	}
}

// An endpoint change pushes only EDS: a proxy subscribed to clusters is not
// sent them again, and still counts as having accepted the new version.
func TestOnlyChangedTypesArePushed(t *testing.T) {
	s, addr := startServer(t)
	withEndpoint := func(port uint32) map[string][]types.Resource {
		r := clusters("a")
		r[resourcev3.EndpointType] = []types.Resource{&endpointv3.ClusterLoadAssignment{ClusterName: "a",
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
					Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}},
			}}}}}}
		return r
	}
	mustPublish(t, s, "v1", withEndpoint(80))
	c := xdstest.Dial(t, addr)
	cds := xdstest.Connect(t, c, fleet, "pod-cds", resourcev3.ClusterType)
	eds := xdstest.Connect(t, c, fleet, "pod-eds", resourcev3.EndpointType, "a")
	typeOf := func(p *xdstest.Proxy) string {
		if p == eds {
			return resourcev3.EndpointType
		}
		return resourcev3.ClusterType
	}
	for _, p := range []*xdstest.Proxy{cds, eds} {
		if resp, err := p.Next(""); err != nil || resp.GetVersionInfo() != s.TypeVersion(fleet, typeOf(p)) {
			t.Fatalf("first response: %v, %v", resp.GetVersionInfo(), err)
		}
	}
	waitCounts(t, s, "v1", ProxyCounts{Connected: 2, Acked: 2})

	mustPublish(t, s, "v2", withEndpoint(81))
	if resp, err := eds.Next(""); err != nil || resp.GetVersionInfo() != s.TypeVersion(fleet, resourcev3.EndpointType) {
		t.Fatalf("EDS after the change: %v, %v", resp.GetVersionInfo(), err)
	}
	waitCounts(t, s, "v2", ProxyCounts{Connected: 2, Acked: 2})

	// Nothing reaches the clusters subscriber until clusters change.
	got := make(chan string, 1)
	go func() {
		resp, err := cds.Next("")
		if err == nil {
			got <- resp.GetVersionInfo()
		}
	}()
	select {
	case v := <-got:
		t.Fatalf("the CDS subscriber was sent version %s for an endpoint change", v)
	case <-time.After(500 * time.Millisecond):
	}
	r := withEndpoint(81)
	r[resourcev3.ClusterType] = clusters("a", "b")[resourcev3.ClusterType]
	mustPublish(t, s, "v3", r)
	select {
	case v := <-got:
		if v != s.TypeVersion(fleet, resourcev3.ClusterType) {
			t.Errorf("CDS subscriber got %s, want v3", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the CDS subscriber was not sent the cluster change")
	}
}
