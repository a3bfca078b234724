package xds

import (
	"bytes"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// An encoded resource is its resource to everyone who looks: the cache
// (name, marshalling) and protobuf (size, equality, JSON).
func TestEncodedResourcesAreTheirResources(t *testing.T) {
	byType := mustParse(t, validResources())
	for _, k := range Kinds {
		items := byType[k.TypeURL]
		if len(items) == 0 {
			t.Fatalf("the valid resources have no %s", k.Field)
		}
		encoded := encodeKind(NewHash(), k.TypeURL, items)
		for _, r := range encoded {
			if _, ok := r.(*encodedResource); !ok {
				t.Fatalf("%s: %T was not encoded", k.Field, r)
			}
			p := plain(r)
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := cachev3.MarshalResource(r)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: the cache marshals %x (%v), want %x", k.Field, got, err, want)
			}
			if n := proto.Size(r); n != len(want) {
				t.Errorf("%s: size %d, want %d", k.Field, n, len(want))
			}
			if got, want := cachev3.GetResourceName(r), k.name(p); got != want || got == "" {
				t.Errorf("%s: the cache names it %q, want %q", k.Field, got, want)
			}
			if !proto.Equal(r, p) {
				t.Errorf("%s: not equal to its resource", k.Field)
			}
			gotJSON, err1 := protojson.Marshal(r)
			wantJSON, err2 := protojson.Marshal(p)
			if err1 != nil || err2 != nil || !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("%s: JSON %s (%v), want %s (%v)", k.Field, gotJSON, err1, wantJSON, err2)
			}
		}
	}
}

// The versions of a content are those that the releases before gave it
// (these values were computed by the build before resources were encoded):
// during an upgrade, replicas of both releases give the same content the
// same version, and a proxy that moves from one to the other is not sent
// its configuration again. A dependency that changes how a message
// marshals changes them too, and so pushes every resource to every proxy
// when it is rolled out: this test says so.
func TestVersionsAreStable(t *testing.T) {
	byType := mustParse(t, validResources())
	if got, want := Version(byType), "2366f2f93c04d2cb"; got != want {
		t.Errorf("Version = %s, want %s", got, want)
	}
	s, _ := startServer(t)
	mustPublish(t, s, "v1", byType)
	want := map[string]string{"listeners": "87ea8c2817c4c5cf", "routes": "9fa0663fcee49621",
		"clusters": "5cdbd1402f2d39ea", "endpoints": "e3b29723d6697767", "secrets": "3ba844d0e487570a"}
	for _, k := range Kinds {
		if got := s.TypeVersion(fleet, k.TypeURL); got != want[k.Field] {
			t.Errorf("%s are served at version %s, want %s", k.Field, got, want[k.Field])
		}
		if got := Version(map[string][]types.Resource{k.TypeURL: byType[k.TypeURL]}); got != want[k.Field] {
			t.Errorf("Version of the %s = %s, want %s", k.Field, got, want[k.Field])
		}
	}
}

// mark is field 1000 with the value 1: a field no Envoy message has, which
// no marshalling of a published resource adds.
var mark = []byte{0xc0, 0x3e, 0x01}

// What a proxy is sent, over state-of-the-world or delta, is the wire form
// encoded at publication, not the resource marshalled again for the
// response: the test marks the wire forms of the published clusters, and
// only a copy of them sends the mark.
func TestProxiesAreSentTheWireForm(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a", "b"))
	snap, err := s.cache.GetSnapshot(fleet)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range snap.GetResources(resourcev3.ClusterType) {
		e, ok := r.(*encodedResource)
		if !ok {
			t.Fatalf("cluster %s is served as %T, not encoded at publication", name, r)
		}
		e.wire = append(append([]byte(nil), e.wire...), mark...)
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
