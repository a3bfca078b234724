package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Proxies reports each proxy of a published fleet: when its stream opened
// and last asked, and per type the last version sent, the one acked and
// the last NACK, which an ACK clears.
func TestTrackerProxies(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := NewTracker()
	tr.now = func() time.Time { return clock }
	ctx := context.Background()
	tr.Published("ns/edge", "v1", nil)
	node := &corev3.Node{Id: "edge-1", Cluster: "ns/edge"}
	lds, cds := resourcev3.ListenerType, resourcev3.ClusterType

	_ = tr.OnStreamOpen(ctx, 1, "")
	_ = tr.OnStreamOpen(ctx, 2, "") // another fleet's, not published: not reported
	_ = tr.OnStreamRequest(2, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "x", Cluster: "ns/ghost"}, TypeUrl: lds})
	opened := clock
	clock = clock.Add(time.Second)
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: lds})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: cds})
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: lds, VersionInfo: "l1", Nonce: "1"})
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: cds, VersionInfo: "c1", Nonce: "2"})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: lds, VersionInfo: "l1", ResponseNonce: "1"})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: cds, ResponseNonce: "2", ErrorDetail: &statuspb.Status{Message: "no"}})
	clock = clock.Add(time.Second)
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: lds, VersionInfo: "l2", Nonce: "3"})

	want := []ProxyState{{Node: "edge-1", Fleet: "ns/edge", Since: opened, LastSeen: opened.Add(time.Second), Types: map[string]TypeState{
		lds: {Sent: "l2", Acked: "l1"},
		cds: {Sent: "c1", NACK: &NACK{Version: "c1", Detail: "no"}},
	}}}
	if got := tr.Proxies(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Proxies =\n%+v\nwant\n%+v", got, want)
	}

	// An ACK clears the NACK; a closed stream is gone.
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: cds, VersionInfo: "c2", Nonce: "4"})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: cds, VersionInfo: "c2", ResponseNonce: "4"})
	if got := tr.Proxies()[0].Types[cds]; !reflect.DeepEqual(got, TypeState{Sent: "c2", Acked: "c2"}) {
		t.Errorf("after the ACK, clusters = %+v", got)
	}
	tr.OnStreamClosed(1, node)
	if got := tr.Proxies(); len(got) != 0 {
		t.Errorf("after the stream closed: %+v", got)
	}
}

// recount is how a fleet's proxies stand with version, counted from
// scratch: what the tracker's kept counts must always equal.
func recount(t *Tracker, fleet, version string) (c ProxyCounts, details map[string]bool) {
	details = map[string]bool{}
	label := t.labels(fleet, version)
	for _, s := range streamsOf(t) {
		if s.fleet != fleet || s.record == nil {
			continue
		}
		c.Connected++
		st, r := judge(s, label)
		switch st {
		case rejected:
			c.Nacked++
			details[r.detail+"|"+r.typeURL+"|"+s.node] = true
		case accepted:
			c.Acked++
		}
	}
	return c, details
}

// However streams open, ask, ACK, NACK and close, and however fleets are
// published and forgotten, the counts the tracker keeps equal a recount.
func TestTrackerCountsFollowEveryEvent(t *testing.T) {
	types := []string{resourcev3.ListenerType, resourcev3.ClusterType, resourcev3.EndpointType}
	fleets := []string{"ns/a", "ns/b"}
	for seed := range int64(50) {
		rnd := rand.New(rand.NewPCG(uint64(seed), 7))
		tr := NewTracker()
		ctx := context.Background()
		var open []int64
		nonce := 0
		published := map[string]string{}
		for step := range 400 {
			switch op := rnd.IntN(10); {
			case op == 0 && len(open) < 30: // a stream opens and names its node
				id := int64(step + 1)
				_ = tr.OnStreamOpen(ctx, id, "")
				open = append(open, id)
				f := fleets[rnd.IntN(len(fleets))]
				_ = tr.OnStreamRequest(id, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprint("p", id), Cluster: f}, TypeUrl: types[rnd.IntN(len(types))]})
			case op == 1 && len(open) > 0: // a stream closes
				i := rnd.IntN(len(open))
				tr.OnStreamClosed(open[i], nil)
				open = append(open[:i], open[i+1:]...)
			case op == 2: // a fleet is published, or its endpoints change
				f := fleets[rnd.IntN(len(fleets))]
				v := fmt.Sprint("v", rnd.IntN(3))
				tv := map[string]string{}
				for _, typ := range types {
					tv[typ] = fmt.Sprint(typ[len(typ)-3:], rnd.IntN(2))
				}
				tr.Published(f, v, tv)
				published[f] = v
			case op == 3: // a fleet is forgotten
				f := fleets[rnd.IntN(len(fleets))]
				tr.Forget(f)
				delete(published, f)
			case len(open) > 0: // a response, and its ACK or NACK
				id := open[rnd.IntN(len(open))]
				typ := types[rnd.IntN(len(types))]
				s := tr.streamOf(id)
				version := fmt.Sprint(typ[len(typ)-3:], rnd.IntN(2))
				if v, ok := published[s.fleet]; ok && rnd.IntN(2) == 0 {
					version = tr.labels(s.fleet, v)(typ)
				}
				nonce++
				n := fmt.Sprint(nonce)
				tr.OnStreamResponse(ctx, id, nil, &discoveryv3.DiscoveryResponse{TypeUrl: typ, VersionInfo: version, Nonce: n})
				req := &discoveryv3.DiscoveryRequest{TypeUrl: typ, VersionInfo: version, ResponseNonce: n}
				if rnd.IntN(4) == 0 {
					req.VersionInfo = ""
					req.ErrorDetail = &statuspb.Status{Message: fmt.Sprint("rejected by ", id)}
				}
				_ = tr.OnStreamRequest(id, req)
			}
			for f, v := range published {
				want, details := recount(tr, f, v)
				got := tr.Counts(f, v)
				lastNACK := ""
				if got.LastNACK != "" {
					lastNACK = got.LastNACK + "|" + got.LastNACKType + "|" + got.LastNACKNode
				}
				got.LastNACK, got.LastNACKType, got.LastNACKNode = "", "", ""
				if got != want {
					t.Fatalf("seed %d, step %d: Counts(%s, %s) = %+v, a recount gives %+v", seed, step, f, v, got, want)
				}
				if (want.Nacked > 0) != (lastNACK != "") || (lastNACK != "" && !details[lastNACK]) {
					t.Fatalf("seed %d, step %d: LastNACK %q, the rejections are %v", seed, step, lastNACK, details)
				}
			}
		}
	}
}

// An ACK costs the same whatever the number of proxies: compare the
// ns/op at each size (go test -bench Tracker ./internal/xds/).
func BenchmarkTrackerACK(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n, " proxies"), func(b *testing.B) {
			tr := NewTracker()
			ctx := context.Background()
			tr.Published("ns/edge", "v1", map[string]string{resourcev3.EndpointType: "e1"})
			for id := range int64(n) {
				_ = tr.OnStreamOpen(ctx, id, "")
				_ = tr.OnStreamRequest(id, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprint(id), Cluster: "ns/edge"}, TypeUrl: resourcev3.EndpointType})
			}
			b.ResetTimer()
			for i := range b.N {
				id := int64(i % n)
				nonce := fmt.Sprint(i)
				tr.OnStreamResponse(ctx, id, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resourcev3.EndpointType, VersionInfo: "e1", Nonce: nonce})
				_ = tr.OnStreamRequest(id, &discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, VersionInfo: "e1", ResponseNonce: nonce})
			}
		})
	}
}

// Beyond maxVersions, a fleet's tracker forgets the versions that no proxy
// stands with, least recently published first, and keeps the one a proxy
// accepted: its counts stay true however many versions come after.
func TestTrackerKeepsTheVersionsProxiesStandWith(t *testing.T) {
	tr := NewTracker()
	ctx := context.Background()
	cds := resourcev3.ClusterType
	publish := func(i int) {
		tr.Published("ns/edge", fmt.Sprint("v", i), map[string]string{cds: fmt.Sprint("c", i)})
	}
	for i := range 4 {
		publish(i)
	}
	_ = tr.OnStreamOpen(ctx, 1, "")
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "pod-1", Cluster: "ns/edge"}, TypeUrl: cds})
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: cds, VersionInfo: "c3", Nonce: "1"})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: cds, VersionInfo: "c3", ResponseNonce: "1"})
	for i := 4; i < 3*maxVersions; i++ {
		publish(i)
	}

	want := ProxyCounts{Connected: 1, Acked: 1}
	if got := tr.Counts("ns/edge", "v3"); got != want {
		t.Errorf("Counts of v3, which the proxy accepted, %d versions ago: %+v, want %+v", 3*maxVersions-4, got, want)
	}
	if got := tr.Counts("ns/edge", fmt.Sprint("v", 3*maxVersions-1)); got != (ProxyCounts{Connected: 1}) {
		t.Errorf("Counts of the published version: %+v, want the proxy pending", got)
	}
	f := tr.lockedFleet("ns/edge")
	defer f.mu.Unlock()
	if n := len(f.typeVersions); n != maxVersions {
		t.Errorf("the tracker remembers %d versions, want %d", n, maxVersions)
	}
	for _, v := range []string{"v0", "v2", "v4"} {
		if _, kept := f.typeVersions[v]; kept {
			t.Errorf("%s, which no proxy stands with, is remembered over newer versions", v)
		}
	}
}

// A proxy that stops asking for every resource of a type by name (Envoy
// unsubscribes from EDS when its last EDS cluster goes) accepts a version
// with the other types it acknowledged: its standing does not wait for an
// answer about resources it no longer asks for.
func TestTrackerUnsubscribedTypeDoesNotHoldTheProxy(t *testing.T) {
	tr := NewTracker()
	ctx := context.Background()
	_ = tr.OnStreamOpen(ctx, 1, "")
	node := &corev3.Node{Id: "p1", Cluster: "ns/a"}
	tr.Published("ns/a", "v1", map[string]string{resourcev3.ClusterType: "c1", resourcev3.EndpointType: "e1"})
	ack := func(typ, version, nonce string, names ...string) {
		tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: typ, VersionInfo: version, Nonce: nonce})
		_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typ, VersionInfo: version, ResponseNonce: nonce, ResourceNames: names})
	}
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.ClusterType})
	ack(resourcev3.ClusterType, "c1", "1")
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"backend"}})
	ack(resourcev3.EndpointType, "e1", "2", "backend")
	if c := tr.Counts("ns/a", "v1"); c.Acked != 1 {
		t.Fatalf("counts at v1 = %+v, want the proxy acked", c)
	}
	// The cluster goes: the proxy takes the clusters, and asks for no
	// endpoints any more.
	tr.Published("ns/a", "v2", map[string]string{resourcev3.ClusterType: "c2", resourcev3.EndpointType: "e2"})
	ack(resourcev3.ClusterType, "c2", "3")
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.EndpointType, VersionInfo: "e1", ResponseNonce: "2"})
	if c := tr.Counts("ns/a", "v2"); c.Acked != 1 || c.Connected != 1 {
		t.Errorf("counts at v2 = %+v, want the proxy acked", c)
	}
}

// A client that asks for every endpoint without naming any (a stand-in, or
// a test client) is waiting for them: its standing hangs on them.
func TestTrackerWildcardRequestIsARequest(t *testing.T) {
	tr := NewTracker()
	ctx := context.Background()
	_ = tr.OnStreamOpen(ctx, 1, "")
	node := &corev3.Node{Id: "p1", Cluster: "ns/a"}
	tr.Published("ns/a", "v1", map[string]string{resourcev3.EndpointType: "e1"})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.EndpointType})
	if c := tr.Counts("ns/a", "v1"); c.Acked != 0 || c.Connected != 1 {
		t.Errorf("counts before the answer = %+v, want the proxy pending", c)
	}
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resourcev3.EndpointType, VersionInfo: "e1", Nonce: "1"})
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.EndpointType, VersionInfo: "e1", ResponseNonce: "1"})
	if c := tr.Counts("ns/a", "v1"); c.Acked != 1 {
		t.Errorf("counts after the ACK = %+v, want the proxy acked", c)
	}
}

// streamsOf returns the records of the tracker's open streams.
func streamsOf(t *Tracker) []*stream {
	var out []*stream
	t.streams.Range(func(_, v any) bool {
		out = append(out, v.(*stream))
		return true
	})
	return out
}

// BenchmarkStreamRecord reports what the server keeps of a stream beside
// the cache (B/stream: its record, and its place in the maps): 10,000
// streams, each at a published fleet's version of every type served, ACKed.
// The cache's state of a stream is not counted (go test -bench
// StreamRecord ./internal/xds/server/).
func BenchmarkStreamRecord(b *testing.B) {
	const n = 10000
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	ctx := context.Background()
	for range b.N {
		tr := NewTracker()
		tr.Published("ns/edge", "v1", nil)
		g := guard{Tracker: tr, names: DefaultLimits.names(), log: logr.Discard()}
		before := heap()
		for id := int64(1); id <= n; id++ {
			if err := g.OnStreamOpen(ctx, id, ""); err != nil {
				b.Fatal(err)
			}
			node := &corev3.Node{Id: fmt.Sprint("pod-", id), Cluster: "ns/edge"}
			for i, k := range resource.Kinds {
				if err := g.OnStreamRequest(id, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: k.TypeURL, ResourceNames: []string{"a"}}); err != nil {
					b.Fatal(err)
				}
				nonce := fmt.Sprint(i)
				g.OnStreamResponse(ctx, id, nil, &discoveryv3.DiscoveryResponse{TypeUrl: k.TypeURL, VersionInfo: "v1", Nonce: nonce})
				if err := g.OnStreamRequest(id, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: k.TypeURL, VersionInfo: "v1", ResponseNonce: nonce, ResourceNames: []string{"a"}}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(heap()-before)/n, "B/stream")
		if c := tr.Counts("ns/edge", "v1"); c.Acked != n {
			b.Fatalf("%+v, want every stream acked", c)
		}
	}
}
