package server

import (
	"bytes"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// A published resource is encoded as what go-control-plane's cache sent
// for it: its deterministic marshalling, under its type, and in delta the
// SHA-256 of that as its version (delta proxies keep it across an upgrade,
// in initial_resource_versions).
func TestEncodedResourcesAreTheirResources(t *testing.T) {
	byType := baseFleet(1)
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

// Each type is served at the version of its content (resource.Version,
// whose values are pinned across releases): a proxy that moves from a
// replica of one release to one of another is not sent its configuration
// again.
func TestTypesAreServedAtTheirContentVersion(t *testing.T) {
	byType := baseFleet(1)
	s, _ := startServer(t)
	mustPublish(t, s, "v1", byType)
	for _, k := range resource.Kinds {
		want := resource.Version(map[string][]types.Resource{k.TypeURL: byType[k.TypeURL]})
		if got := s.TypeVersion(fleet, k.TypeURL); got != want {
			t.Errorf("%s are served at version %s, want %s", k.Field, got, want)
		}
	}
}

// mark is field 1000 with the value 1: a field no Envoy message has, which
// no marshalling of a published resource adds.
var mark = []byte{0xc0, 0x3e, 0x01}

// What a proxy is sent, over state-of-the-world or delta, is the wire form
// encoded at publication, not the resource marshalled again for the
// response: the test marks the wire forms of the published clusters, and
// only they send the mark.
func TestProxiesAreSentTheWireForm(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a", "b"))
	for _, e := range s.cache.published(fleet).types[kindIndex(resourcev3.ClusterType)].sorted {
		e.any.Value = append(append([]byte(nil), e.any.GetValue()...), mark...)
	}
	p := xdstest.Connect(t, xdstest.Dial(t, addr), fleet, "pod-1", resourcev3.ClusterType)
	resp, err := p.Next("")
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

	published := s.Resources(fleet)[resourcev3.ClusterType]
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
