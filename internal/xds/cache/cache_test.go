package cache

import (
	"bytes"
	"context"
	"maps"
	"net"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	sotwv3 "github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// mustSnapshot encodes resources as a publication.
func mustSnapshot(t *testing.T, version string, resources map[string][]types.Resource) *Snapshot {
	t.Helper()
	p, err := NewSnapshot(version, resources)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A watch of a type the server does not serve is never answered, whoever
// creates it, and leaves nothing in the cache.
func TestFleetCacheLeavesUnknownTypesUnanswered(t *testing.T) {
	c := New(testNames, nil)
	// A proxy of the published fleet, at a version the cache does not have:
	// a watch of a served type would be answered at once.
	node := &corev3.Node{Id: "x", Cluster: fleet}
	c.Publish(fleet, mustSnapshot(t, "v1", clusters("a")), nil)
	sotw, deltas := make(chan cachev3.Response, 1), make(chan cachev3.DeltaResponse, 1)
	cancelSotw, err := c.CreateWatch(&cachev3.Request{Node: node, TypeUrl: "type.googleapis.com/other.T", VersionInfo: "x"},
		streamv3.NewSotwSubscription(nil, true), sotw)
	if err != nil {
		t.Fatalf("sotw: %v", err)
	}
	cancelDelta, err := c.CreateDeltaWatch(&cachev3.DeltaRequest{Node: node, TypeUrl: "type.googleapis.com/other.T"},
		streamv3.NewDeltaSubscription(nil, nil, nil, true), deltas)
	if err != nil {
		t.Fatalf("delta: %v", err)
	}
	// A publication answers every watch it can: none of these.
	c.Publish(fleet, mustSnapshot(t, "v2", clusters("a", "b")), nil)
	if len(sotw) != 0 || len(deltas) != 0 {
		t.Errorf("answered %d state-of-the-world and %d delta watches of a type not served, want none", len(sotw), len(deltas))
	}
	if n := fleetsIn(c); n != 1 {
		t.Errorf("the cache has %d fleets, want the published one alone", n)
	}
	if f := entryOf(c, fleet); f == nil || len(f.streams) != 0 {
		t.Errorf("the cache keeps streams of watches of a type not served")
	}
	cancelSotw()
	cancelDelta()
}

// A state of the world request without names, after named ones, subscribes
// to no secret: it is sent none, where a wildcard would get them all. A new
// version of the secrets still reaches it, empty, so that the proxy's
// answer tells where it stands with the version.
func TestUnsubscribingFromEverySecretGetsNothing(t *testing.T) {
	c := New(testNames, nil)
	c.Publish(fleet, mustSnapshot(t, "v1", secrets("s1")), nil)
	sub := streamv3.NewSotwSubscription([]string{"s1"}, true)
	sub.SetResourceSubscription(nil) // the names are dropped
	if sub.IsWildcard() {
		t.Fatal("the subscription is a wildcard")
	}
	ch := make(chan cachev3.Response, 1)
	cancel, err := c.CreateWatch(&cachev3.Request{Node: &corev3.Node{Cluster: fleet}, TypeUrl: resourcev3.SecretType, VersionInfo: "old"}, sub, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	resp := <-ch
	if out, _ := resp.GetDiscoveryResponse(); len(out.GetResources()) != 0 {
		t.Errorf("a request without names was sent %d secrets", len(out.GetResources()))
	}
	// At the version, it waits.
	cancel, err = c.CreateWatch(&cachev3.Request{Node: &corev3.Node{Cluster: fleet}, TypeUrl: resourcev3.SecretType,
		VersionInfo: resp.GetResponseVersion()}, sub, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if st := entryOf(c, fleet).streams[ch]; len(ch) != 0 || st.types[kindIndex(resourcev3.SecretType)].open == nil {
		t.Errorf("a request at the version was answered (%d responses), or does not wait", len(ch))
	}
}

// A published resource is encoded as what go-control-plane's cache sent
// for it: its deterministic marshalling, under its type, and in delta the
// SHA-256 of that as its version (delta proxies keep it across an upgrade,
// in initial_resource_versions).
func TestEncodedResourcesAreTheirResources(t *testing.T) {
	byType := everyKind()
	for _, k := range resource.Kinds {
		items := byType[k.TypeURL]
		if len(items) == 0 {
			t.Fatalf("the valid resources have no %s", k.Field)
		}
		ts, err := newTypeSnapshot(k.TypeURL, items)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts.sorted) != len(items) || len(ts.all) != len(items) {
			t.Fatalf("%s: %d encoded, %d Anys, want %d", k.Field, len(ts.sorted), len(ts.all), len(items))
		}
		for i, e := range ts.sorted {
			want, err := cachev3.MarshalResource(e.resource)
			if err != nil {
				t.Fatal(err)
			}
			if e.any.GetTypeUrl() != k.TypeURL || !bytes.Equal(e.any.GetValue(), want) || ts.all[i] != e.any {
				t.Errorf("%s %s: sent as %s %x, want %s %x", k.Field, e.name, e.any.GetTypeUrl(), e.any.GetValue(), k.TypeURL, want)
			}
			if e.version != cachev3.HashResource(want) || e.delta.GetVersion() != e.version || e.delta.GetName() != e.name || e.delta.GetResource() != e.any {
				t.Errorf("%s %s: delta sends %v, version %s", k.Field, e.name, e.delta, e.version)
			}
			if got := cachev3.GetResourceName(e.resource); got != e.name || got == "" || ts.byName[got] != e {
				t.Errorf("%s: named %q, want %q", k.Field, e.name, got)
			}
		}
	}
}

// mark is field 1000 with the value 1: a field no Envoy message has, which
// no marshalling of a published resource adds.
var mark = []byte{0xc0, 0x3e, 0x01}

// What a proxy is sent, over state-of-the-world or delta, is the wire form
// encoded at publication, not the resource marshalled again for the
// response: the test marks the wire forms of the published clusters, and
// only they send the mark, through go-control-plane's stream server.
func TestProxiesAreSentTheWireForm(t *testing.T) {
	c := New(testNames, nil)
	p := mustSnapshot(t, "v1", clusters("a", "b"))
	for _, e := range p.types[kindIndex(resourcev3.ClusterType)].sorted {
		e.any.Value = append(append([]byte(nil), e.any.GetValue()...), mark...)
	}
	c.Publish(fleet, p, nil)
	addr := serve(t, c)
	q := xdstest.Connect(t, xdstest.Dial(t, addr), fleet, "pod-1", resourcev3.ClusterType)
	resp, err := q.Next("")
	if err != nil {
		t.Fatal(err)
	}
	checkMarked(t, resp.GetResources())

	// Delta, which sends each resource on its own, sends the same bytes.
	st := xdstest.ConnectDelta(t, xdstest.Dial(t, addr), fleet, "pod-2", resourcev3.ClusterType)
	delta, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var sent []*anypb.Any
	for _, r := range delta.GetResources() {
		sent = append(sent, r.GetResource())
	}
	checkMarked(t, sent)

	published := c.Published(fleet).Resources()[resourcev3.ClusterType]
	if len(published) != 2 {
		t.Fatalf("Resources has %d clusters, want 2", len(published))
	}
	for _, r := range published {
		if _, ok := r.(*clusterv3.Cluster); !ok {
			t.Errorf("Resources returns a %T, want the clusters as published", r)
		}
	}
}

func checkMarked(t *testing.T, sent []*anypb.Any) {
	t.Helper()
	if len(sent) != 2 {
		t.Fatalf("%d resources sent, want 2", len(sent))
	}
	for _, a := range sent {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil || c.GetName() == "" {
			t.Errorf("sent %x: not a named cluster (%v)", a.GetValue(), err)
		}
		if !bytes.HasSuffix(a.GetValue(), mark) {
			t.Errorf("sent cluster %q as %x: not the wire form encoded at publication", c.GetName(), a.GetValue())
		}
	}
}

// serve serves c over plaintext ADS, with go-control-plane's stream
// server and no callbacks, for the test's duration, and returns its address.
func serve(t *testing.T, c *Cache) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(ctx, c, nil, sotwv3.WithOrderedADS()))
	done := make(chan struct{})
	go func() { _ = g.Serve(lis); close(done) }()
	t.Cleanup(func() { cancel(); g.Stop(); <-done })
	return lis.Addr().String()
}

// BenchmarkAnswerDelta measures what the cache computes for one delta
// stream subscribed by name to 50 load assignments, when one of them
// changed: the push, and the ACK that follows it.
func BenchmarkAnswerDelta(b *testing.B) {
	before, err := newTypeSnapshot(resourcev3.EndpointType, endpointsOf50(9000))
	if err != nil {
		b.Fatal(err)
	}
	after, err := newTypeSnapshot(resourcev3.EndpointType, endpointsOf50(9001))
	if err != nil {
		b.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(after.byName))
	first := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: names}
	sub := streamv3.NewDeltaSubscription(names, nil, nil, true)
	sub.SetReturnedResources(answerDelta(before, first, sub).returned)
	ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: "1"}
	pushed := answerDelta(after, ack, sub)
	if len(pushed.resources) != 1 {
		b.Fatalf("pushed %d resources, want the one that changed", len(pushed.resources))
	}
	b.Run("push", func(b *testing.B) {
		for b.Loop() {
			answerDelta(after, ack, sub)
		}
	})
	acked := streamv3.NewDeltaSubscription(names, nil, nil, true)
	acked.SetReturnedResources(pushed.returned)
	b.Run("ack", func(b *testing.B) {
		for b.Loop() {
			if answerDelta(after, ack, acked) != nil {
				b.Fatal("an ACK of the type's version is answered")
			}
		}
	})
}

// fleetsIn counts the cache's entries.
func fleetsIn(c *Cache) int {
	n := 0
	c.fleets.Range(func(any, any) bool { n++; return true })
	return n
}

// entryOf returns fleet's entry, or nil.
func entryOf(c *Cache, fleet string) *fleetEntry {
	v, _ := c.fleets.Load(fleet)
	f, _ := v.(*fleetEntry)
	return f
}
