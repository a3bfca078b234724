package cache

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
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
			sub := streamv3.NewSotwSubscription(tc.names, !tc.named)
			if tc.named {
				sub = streamv3.NewSotwSubscription([]string{"x"}, true)
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
	both := map[string]string{"a": ver("a"), "b": ver("b"), typeVersionKey: v}
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
		{name: "a wildcard, up to date", returned: both, noAnswer: true},
		{name: "a wildcard, one resource changed", returned: map[string]string{"a": "old", "b": ver("b"), typeVersionKey: "old"}, want: []string{"a"}},
		{name: "a wildcard, one resource gone", returned: map[string]string{"a": ver("a"), "b": ver("b"), "c": "x", typeVersionKey: "old"}, gone: []string{"c"}},
		{name: "a wildcard, a name unsubscribed that it holds", returned: map[string]string{"a": "", "b": ver("b"), typeVersionKey: v}, want: []string{"a"}},
		{name: "a wildcard, a name unsubscribed that it does not hold", returned: map[string]string{"a": ver("a"), "b": ver("b"), "c": "", typeVersionKey: v}, gone: []string{"c"}},
		{name: "named, a name that does not exist", first: []string{"a", "ghost"}, want: []string{"a"}, gone: []string{"ghost"}},
		{name: "named, told it does not exist", first: []string{"a", "ghost"}, returned: map[string]string{"a": ver("a"), "ghost": toldAbsent, typeVersionKey: v}, noAnswer: true},
		{name: "named, subscribed again to what it holds", first: []string{"a"},
			then: &discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"a"}}, returned: both, want: []string{"a"}},
		{name: "named, reconnected with what it holds", first: []string{"a", "b"}, initial: map[string]string{"a": ver("a"), "b": "old"}, want: []string{"b"}},
		{name: "named, reconnected holding all", first: []string{"a"}, initial: map[string]string{"a": ver("a")}},
		{name: "named, the type changed elsewhere", first: []string{"a"}, returned: map[string]string{"a": ver("a"), typeVersionKey: "old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: tc.first, InitialResourceVersions: tc.initial}
			sub := streamv3.NewDeltaSubscription(tc.first, nil, tc.initial, true)
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

// answerDeltaPlain is answerDelta's rules written out plainly: every
// subscribed name visited in order, and the whole response built before it
// is judged. answerDelta takes shortcuts (an ACK is judged without building
// anything, and only what is sent is sorted); it must answer the same.
func answerDeltaPlain(t *typeSnapshot, req *discoveryv3.DeltaDiscoveryRequest, sub streamv3.Subscription) *deltaResponse {
	returned, subscribed := sub.ReturnedResources(), sub.SubscribedResources()
	again := map[string]bool{}
	for _, n := range req.GetResourceNamesSubscribe() {
		if _, known := req.GetInitialResourceVersions()[n]; !known {
			again[n] = true
		}
	}
	resp := &deltaResponse{req: req, version: t.version, returned: map[string]string{}}
	send := func(e *encodedResource) {
		resp.returned[e.name] = e.version
		if v, ok := returned[e.name]; !ok || v != e.version || again[e.name] {
			resp.resources = append(resp.resources, e.delta)
		}
	}
	absent := func(name string) {
		resp.returned[name] = toldAbsent
		if returned[name] != toldAbsent {
			resp.removed = append(resp.removed, name)
		}
	}
	names := slices.Sorted(maps.Keys(subscribed))
	if sub.IsWildcard() {
		for _, e := range t.sorted {
			send(e)
		}
		for _, name := range names {
			if _, ok := t.byName[name]; !ok {
				absent(name)
			}
		}
		for name, v := range returned {
			if _, ok := resp.returned[name]; !ok && name != typeVersionKey && v != toldAbsent {
				resp.removed = append(resp.removed, name)
			}
		}
	} else {
		for _, name := range names {
			if e, ok := t.byName[name]; ok {
				send(e)
			} else {
				absent(name)
			}
		}
	}
	resp.returned[typeVersionKey] = t.version
	if len(resp.resources) == 0 && len(resp.removed) == 0 && returned[typeVersionKey] == t.version {
		return nil
	}
	sort.Strings(resp.removed)
	return resp
}

// TestAnswerDeltaAsPlain compares answerDelta with answerDeltaPlain on
// random streams: what the fleet holds, what the stream subscribes to, was
// sent and asks for again, every way round.
func TestAnswerDeltaAsPlain(t *testing.T) {
	all := []string{"a", "b", "c", "d"}
	snaps := map[string]*typeSnapshot{}
	for _, names := range [][]string{{}, {"a"}, {"a", "b"}, {"b", "c", "d"}, all} {
		for g := range 2 {
			snaps[fmt.Sprint(names, g)] = clusterTypeSnapshot(t, g, names...)
		}
	}
	keys := slices.Sorted(maps.Keys(snaps))
	r := rand.New(rand.NewPCG(1, 2))
	some := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if r.IntN(2) == 0 {
				out = append(out, n)
			}
		}
		return out
	}
	names := append(slices.Clone(all), "ghost", "*")
	for i := range 20000 {
		ts := snaps[keys[r.IntN(len(keys))]]
		other := snaps[keys[r.IntN(len(keys))]]
		first := some(names...)
		if r.IntN(3) == 0 {
			first = nil // a legacy wildcard
		}
		initial := map[string]string{}
		for _, n := range some(names...) {
			initial[n] = []string{"old", other.version, toldAbsent}[r.IntN(3)]
			if e, ok := other.byName[n]; ok && r.IntN(2) == 0 {
				initial[n] = e.version
			}
		}
		sub := streamv3.NewDeltaSubscription(first, nil, initial, true)
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: first, InitialResourceVersions: initial}
		if r.IntN(2) == 0 {
			// A later request: the stream was sent something, and may
			// subscribe or unsubscribe.
			req = &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: "1",
				ResourceNamesSubscribe: some(names...), ResourceNamesUnsubscribe: some(names...)}
			sub.UpdateResourceSubscriptions(req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe())
			returned := map[string]string{}
			for _, n := range append(some(names...), typeVersionKey) {
				returned[n] = []string{"old", "", toldAbsent, ts.version, other.version}[r.IntN(5)]
				if e, ok := ts.byName[n]; ok && r.IntN(2) == 0 {
					returned[n] = e.version
				}
			}
			if r.IntN(2) == 0 {
				returned[typeVersionKey] = ts.version
			}
			sub.SetReturnedResources(returned)
		}
		got, want := answerDelta(ts, req, sub), answerDeltaPlain(ts, req, sub)
		if (got == nil) != (want == nil) {
			t.Fatalf("case %d: answered %v, want %v", i, got != nil, want != nil)
		}
		if got == nil {
			continue
		}
		if !slices.Equal(got.resources, want.resources) || !slices.Equal(got.removed, want.removed) || !maps.Equal(got.returned, want.returned) {
			t.Fatalf("case %d: answered %v removed %v returned %v, want %v removed %v returned %v",
				i, got.resources, got.removed, got.returned, want.resources, want.removed, want.returned)
		}
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
