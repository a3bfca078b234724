package xds

import (
	"maps"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
)

// clusterTypeSnapshot is the clusters named names, at generation g.
func clusterTypeSnapshot(t *testing.T, g int, names ...string) *typeSnapshot {
	t.Helper()
	var rs []types.Resource
	for _, n := range names {
		rs = append(rs, cluster(n, g))
	}
	ts, err := newTypeSnapshot(resourcev3.ClusterType, rs)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestAnswerSotw(t *testing.T) {
	ab := clusterTypeSnapshot(t, 0, "a", "b")
	v := ab.version
	for _, tc := range []struct {
		name     string
		version  string   // the request's
		names    []string // the request's; nil: a legacy wildcard
		named    bool     // the stream asked by name before: no names is no wildcard
		returned map[string]string
		want     []string // nil: no response
		wildcard bool     // the response says the stream got the whole type
	}{
		{name: "a wildcard, at another version", version: "old", want: []string{"a", "b"}, wildcard: true},
		{name: "a wildcard, at the version", version: v, returned: map[string]string{wildcardSent: v}},
		{name: "a wildcard, at the version, after names", version: v, returned: map[string]string{"a": v}, want: []string{"a", "b"}, wildcard: true},
		{name: "* and a name", version: "old", names: []string{"*", "a"}, want: []string{"a", "b"}, wildcard: true},
		{name: "named, at another version", version: "old", names: []string{"b", "ghost"}, want: []string{"b"}},
		{name: "named, at the version, all sent", version: v, names: []string{"a"}, returned: map[string]string{"a": v}},
		{name: "a new name that exists", version: v, names: []string{"a", "b"}, returned: map[string]string{"a": v}, want: []string{"a", "b"}},
		{name: "a new name that does not exist", version: v, names: []string{"a", "ghost"}, returned: map[string]string{"a": v}},
		{name: "no name after names, at another version", version: "old", named: true, want: []string{}},
		{name: "no name after names, at the version", version: v, named: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := stream.NewSotwSubscription(tc.names, !tc.named)
			if tc.named {
				sub = stream.NewSotwSubscription([]string{"x"}, true)
				sub.SetResourceSubscription(nil)
			}
			if tc.returned != nil {
				sub.SetReturnedResources(tc.returned)
			}
			resp := answerSotw(ab, &discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, VersionInfo: tc.version, ResourceNames: tc.names}, sub)
			if tc.want == nil {
				if resp != nil {
					t.Fatalf("answered with %d resources, want no answer", len(resp.resources))
				}
				return
			}
			if resp == nil {
				t.Fatalf("no answer, want %v", tc.want)
			}
			out, _ := resp.GetDiscoveryResponse()
			got := make([]string, 0)
			for _, a := range out.GetResources() {
				got = append(got, nameOfAny(t, a.GetValue()))
			}
			if !slices.Equal(got, tc.want) || out.GetVersionInfo() != v || out.GetTypeUrl() != resourcev3.ClusterType {
				t.Errorf("answered %v at %s, want %v at %s", got, out.GetVersionInfo(), tc.want, v)
			}
			if _, all := resp.returned[wildcardSent]; all != tc.wildcard {
				t.Errorf("returned %v: wildcard %v, want %v", resp.returned, all, tc.wildcard)
			}
		})
	}
}

func nameOfAny(t *testing.T, b []byte) string {
	t.Helper()
	for _, n := range []string{"a", "b", "c", "ghost"} {
		if want, _ := newTypeSnapshot(resourcev3.ClusterType, []types.Resource{cluster(n, 0)}); string(want.sorted[0].any.GetValue()) == string(b) {
			return n
		}
	}
	t.Fatalf("an unknown resource: %x", b)
	return ""
}

func TestAnswerDelta(t *testing.T) {
	ab := clusterTypeSnapshot(t, 0, "a", "b")
	v := ab.version
	ver := func(name string) string { return ab.byName[name].version }
	held := map[string]string{"a": ver("a"), "b": ver("b"), typeVersionKey: v}
	for _, tc := range []struct {
		name       string
		first      []string          // the stream's first request's subscriptions; nil: a wildcard
		initial    map[string]string // and its initial_resource_versions
		then       *discoveryv3.DeltaDiscoveryRequest
		returned   map[string]string // the stream's, when it was answered since its first request
		want, gone []string          // none: a response with nothing but the type's version
		noAnswer   bool
	}{
		{name: "a wildcard's first request", want: []string{"a", "b"}},
		{name: "a wildcard, up to date", returned: held, noAnswer: true},
		{name: "a wildcard, one resource changed", returned: map[string]string{"a": "old", "b": ver("b"), typeVersionKey: "old"}, want: []string{"a"}},
		{name: "a wildcard, one resource gone", returned: map[string]string{"a": ver("a"), "b": ver("b"), "c": "x", typeVersionKey: "old"}, gone: []string{"c"}},
		{name: "a wildcard, a name unsubscribed that it holds", returned: map[string]string{"a": "", "b": ver("b"), typeVersionKey: v}, want: []string{"a"}},
		{name: "a wildcard, a name unsubscribed that it does not hold", returned: map[string]string{"a": ver("a"), "b": ver("b"), "c": "", typeVersionKey: v}, gone: []string{"c"}},
		{name: "named, a name that does not exist", first: []string{"a", "ghost"}, want: []string{"a"}, gone: []string{"ghost"}},
		{name: "named, told it does not exist", first: []string{"a", "ghost"}, returned: map[string]string{"a": ver("a"), "ghost": toldAbsent, typeVersionKey: v}, noAnswer: true},
		{name: "named, subscribed again to what it holds", first: []string{"a"},
			then: &discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"a"}}, returned: held, want: []string{"a"}},
		{name: "named, reconnected with what it holds", first: []string{"a", "b"}, initial: map[string]string{"a": ver("a"), "b": "old"}, want: []string{"b"}},
		{name: "named, reconnected holding all", first: []string{"a"}, initial: map[string]string{"a": ver("a")}},
		{name: "named, the type changed elsewhere", first: []string{"a"}, returned: map[string]string{"a": ver("a"), typeVersionKey: "old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: tc.first, InitialResourceVersions: tc.initial}
			sub := stream.NewDeltaSubscription(tc.first, nil, tc.initial, true)
			if tc.then != nil {
				req = tc.then
				req.TypeUrl = resourcev3.ClusterType
				sub.UpdateResourceSubscriptions(tc.then.GetResourceNamesSubscribe(), tc.then.GetResourceNamesUnsubscribe())
			}
			if tc.returned != nil {
				// The stream was answered: this is a later request, an ACK
				// unless the case says what.
				sub.SetReturnedResources(maps.Clone(tc.returned))
				if tc.then == nil {
					req = &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: "1"}
				}
			}
			resp := answerDelta(ab, req, sub)
			if tc.noAnswer {
				if resp != nil {
					t.Fatalf("answered %v, removed %v; want no answer", resp.resources, resp.removed)
				}
				return
			}
			if resp == nil {
				t.Fatalf("no answer, want %v, removed %v", tc.want, tc.gone)
			}
			out, _ := resp.GetDeltaDiscoveryResponse()
			got := make([]string, 0)
			for _, r := range out.GetResources() {
				got = append(got, r.GetName())
			}
			if !slices.Equal(got, orEmpty(tc.want)) || !slices.Equal(orEmpty(out.GetRemovedResources()), orEmpty(tc.gone)) || out.GetSystemVersionInfo() != v {
				t.Errorf("answered %v removed %v at %s, want %v removed %v at %s", got, out.GetRemovedResources(), out.GetSystemVersionInfo(), tc.want, tc.gone, v)
			}
			if resp.returned[typeVersionKey] != v {
				t.Errorf("the stream's type version is left at %q, want %s", resp.returned[typeVersionKey], v)
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
