package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

func TestName(t *testing.T) {
	for _, replica := range []string{"kube-envoy-controller-7d9f-abcde", "Host_Name.local", strings.Repeat("x", 300)} {
		name := ShardName(replica, MaxShards-1)
		if len(name) > 253 || strings.ToLower(name) != name || strings.ContainsAny(name, "_ ") {
			t.Errorf("ShardName(%q) = %q", replica, name)
		}
	}
	if Name("A_b") == Name("a-b") {
		t.Error("two replicas share a report")
	}
}

// longReport returns the report of n fleets with names as long as they may
// be, every tenth rejecting its version with an error_detail of publish.MaxDetail.
func longReport(n int) Report {
	r := Report{}
	for i := range n {
		id := fmt.Sprintf("%s/%s-%06d", strings.Repeat("n", 63), strings.Repeat("e", 246), i)
		f := FleetProxies{Version: "0123456789abcdef", Connected: 3, Acked: 3}
		if i%10 == 0 {
			f.Acked, f.Nacked, f.LastNACK = 0, 3, strings.Repeat("x", publish.MaxDetail)
		}
		r[id] = f
	}
	return r
}

// A report of any size is split into shards that each fit ShardBytes,
// every fleet in exactly one; the same report is the same shards.
func TestShards(t *testing.T) {
	for _, n := range []int{0, 1, 100, 2_000} {
		r := longReport(n)
		shards, err := Shards("ns", "replica-a", r, 1)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Shards("ns", "replica-a", r, 1)
		got := Report{}
		total := 0
		for i, cm := range shards {
			data := cm.Data[reportKey]
			total += len(data)
			if len(data) > ShardBytes {
				t.Errorf("%d fleets: shard %d holds %d bytes", n, i, len(data))
			}
			if data != again[i].Data[reportKey] || cm.Name != ShardName("replica-a", i) || ShardCount(cm) != len(shards) {
				t.Errorf("%d fleets: shard %d is %s (%d of %d), differently the second time", n, i, cm.Name, i, ShardCount(cm))
			}
			part, err := Read(cm)
			if err != nil {
				t.Fatal(err)
			}
			for id, f := range part {
				if _, dup := got[id]; dup || ShardOf(id, len(shards)) != i {
					t.Errorf("%d fleets: %s in shard %d", n, id, i)
				}
				got[id] = f
			}
		}
		if !maps.EqualFunc(got, r, FleetProxies.Equal) {
			t.Errorf("%d fleets: the shards hold %d fleets", n, len(got))
		}
		if n > 0 {
			t.Logf("%d fleets with the longest names, one in ten rejecting: %d shards, %d bytes, %d bytes a fleet", n, len(shards), total, total/n)
		}
	}
}

// A replica's shards never become fewer while it runs: a report that
// shrinks keeps its layout, and one that grows doubles it.
func TestShardsGrow(t *testing.T) {
	small, big := longReport(10), longReport(2_000)
	shards, _ := Shards("ns", "r", small, 1)
	if len(shards) != 1 {
		t.Fatalf("ten fleets take %d shards", len(shards))
	}
	grown, _ := Shards("ns", "r", big, len(shards))
	if len(grown) < 2 {
		t.Fatalf("%d fleets take %d shard", len(big), len(grown))
	}
	kept, _ := Shards("ns", "r", small, len(grown))
	if len(kept) != len(grown) {
		t.Errorf("a shrunk report takes %d shards, was %d", len(kept), len(grown))
	}
}

func TestSum(t *testing.T) {
	reports := []Report{
		{"ns/edge": {Version: "v2", Connected: 2, Nacked: 2, LastNACK: "bad"}},
		{"ns/edge": {Version: "v1", Connected: 3, Acked: 3}, "ns/other": {Version: "v9", Connected: 1, Acked: 1}},
	}
	if got := Sum(reports, "ns/edge", "v2"); got != (publish.Acks{Connected: 5, Nacked: 2, LastNACK: "bad"}) {
		t.Errorf("Sum = %+v", got)
	}
	if got := Sum(reports, "ns/edge", "v1"); got != (publish.Acks{Connected: 5, Acked: 3}) {
		t.Errorf("Sum = %+v", got)
	}
	if got := Changed(reports[0], reports[1]); strings.Join(got, ",") != "ns/edge,ns/other" {
		t.Errorf("Changed = %v", got)
	}
}

// The leader gathers each proxy's answer from every replica's report; a
// proxy reported by two replicas (as it moves) answers as the one where it
// answered.
func TestAnswers(t *testing.T) {
	a := Report{"ns/edge": {Version: "v2", Connected: 2, Proxies: map[string]publish.ProxyAnswer{
		"pod-1": {Acked: "v2"}, "pod-2": {}}}}
	b := Report{"ns/edge": {Version: "v2", Connected: 2, Proxies: map[string]publish.ProxyAnswer{
		"pod-2": {Acked: "v1", Nacked: "v2", Detail: "no"}, "pod-3": {Acked: "v1"}}},
		"ns/other": {Version: "v9", Connected: 1, Proxies: map[string]publish.ProxyAnswer{"pod-9": {Acked: "v9"}}}}
	want := map[string]publish.ProxyAnswer{"pod-1": {Acked: "v2"}, "pod-2": {Acked: "v1", Nacked: "v2", Detail: "no"}, "pod-3": {Acked: "v1"}}
	for _, reports := range [][]Report{{a, b}, {b, a}} {
		if got := Answers(reports, "ns/edge"); !maps.Equal(got, want) {
			t.Errorf("Answers = %v, want %v", got, want)
		}
	}
	// A replica with proxies of the fleet that does not list them yet:
	// nothing is known until it does.
	lagging := Report{"ns/edge": {Version: "v2", Connected: 3}}
	if got := Answers([]Report{a, b, lagging}, "ns/edge"); got != nil {
		t.Errorf("with a replica that lists none of its 3 proxies, Answers = %v, want nil", got)
	}
	if got := Answers([]Report{a, {"ns/edge": {Version: "v2"}}}, "ns/edge"); len(got) != 2 {
		t.Errorf("a replica without proxies of the fleet is no matter: Answers = %v", got)
	}
}

// A proxy moving between replicas answers as the one where it answered,
// with the window of a replica that reports one for the version it
// accepted.
func TestAnswersKeepWindows(t *testing.T) {
	w := &publish.Window{Reports: 3, Scopes: map[string]analysis.Figures{"http:edge": {Requests: 7, Errors5xx: 1}}}
	w1 := &publish.Window{Reports: 1}
	cases := []struct {
		name string
		a, b publish.ProxyAnswer
		want publish.ProxyAnswer
	}{
		{"one replica has its window", publish.ProxyAnswer{Acked: "v2"}, publish.ProxyAnswer{Acked: "v2", Window: w}, publish.ProxyAnswer{Acked: "v2", Window: w}},
		{"it answered on one only", publish.ProxyAnswer{}, publish.ProxyAnswer{Acked: "v2", Window: w}, publish.ProxyAnswer{Acked: "v2", Window: w}},
		{"a window of another version", publish.ProxyAnswer{Acked: "v2"}, publish.ProxyAnswer{Acked: "v1", Window: w}, publish.ProxyAnswer{Acked: "v2"}},
		{"two windows: the first replica's", publish.ProxyAnswer{Acked: "v2", Window: w1}, publish.ProxyAnswer{Acked: "v2", Window: w}, publish.ProxyAnswer{Acked: "v2", Window: w1}},
	}
	for _, c := range cases {
		ra := Report{"ns/edge": {Version: "v2", Connected: 1, Proxies: map[string]publish.ProxyAnswer{"pod-1": c.a}}}
		rb := Report{"ns/edge": {Version: "v2", Connected: 1, Proxies: map[string]publish.ProxyAnswer{"pod-1": c.b}}}
		if got := Answers([]Report{ra, rb}, "ns/edge")["pod-1"]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A rolling fleet's entry with its proxies' windows may outgrow a shard:
// it is then alone in its shard, up to MaxEntryBytes; beyond, its windows
// are left out, its answers kept.
func TestShardsHoldWindows(t *testing.T) {
	scope := analysis.Figures{Requests: 100, Errors5xx: 3}
	scope.Duration.Counts[3] = 100
	entry := func(proxies int) FleetProxies {
		f := FleetProxies{Version: "v2", Connected: proxies, Acked: proxies, Proxies: map[string]publish.ProxyAnswer{}}
		for i := range proxies {
			f.Proxies[fmt.Sprintf("edge-7d9f8c6b5-%05d", i)] = publish.ProxyAnswer{Acked: "0123456789abcdef", Window: &publish.Window{Reports: 6,
				Scopes: map[string]analysis.Figures{"http:edge-001": scope, "cluster:backend1": scope, "cluster:backend2": scope}}}
		}
		return f
	}
	for _, c := range []struct {
		proxies int
		windows bool
	}{{1000, true}, {2000, true}, {3000, false}} {
		r := Report{"ns/edge": entry(c.proxies), "ns/other": {Version: "v1", Connected: 1, Acked: 1}}
		shards, err := Shards("ns", "replica-1", r, 1)
		if err != nil {
			t.Fatalf("%d proxies: %v", c.proxies, err)
		}
		got := Report{}
		for _, cm := range shards {
			if n := len(cm.Data[reportKey]); n > MaxEntryBytes {
				t.Errorf("%d proxies: a shard of %d bytes", c.proxies, n)
			}
			part, err := Read(cm)
			if err != nil {
				t.Fatal(err)
			}
			maps.Copy(got, part)
		}
		f := got["ns/edge"]
		if len(f.Proxies) != c.proxies || got["ns/other"].Acked != 1 {
			t.Fatalf("%d proxies: read back %d of them, and %+v", c.proxies, len(f.Proxies), got["ns/other"])
		}
		if a := f.Proxies["edge-7d9f8c6b5-00000"]; a.Acked == "" || (a.Window != nil) != c.windows {
			t.Errorf("%d proxies: %+v, want its answer, with its window: %v", c.proxies, a, c.windows)
		}
		t.Logf("%d proxies of a rolling fleet with windows: %d shards", c.proxies, len(shards))
	}
}

// A proxy's stats window of three scopes takes what ShardBytes' comment
// says: 355 bytes with counts of three digits, 823 with every figure and
// bucket at six digits.
func TestWindowBytes(t *testing.T) {
	typical := analysis.Figures{Requests: 100, Errors5xx: 3}
	typical.Duration.Counts[3] = 100
	full := analysis.Figures{Requests: 100000, Errors5xx: 100000, Resets: 100000, ConnectFailures: 100000}
	for i := range full.Duration.Counts {
		full.Duration.Counts[i] = 100000
	}
	full.Duration.Over = 100000
	for _, c := range []struct {
		f    analysis.Figures
		want int
	}{{typical, 355}, {full, 823}} {
		a := publish.ProxyAnswer{Acked: "0123456789abcdef"}
		without, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		a.Window = &publish.Window{Reports: 6, Scopes: map[string]analysis.Figures{"http:edge-001": c.f, "cluster:backend1": c.f, "cluster:backend2": c.f}}
		with, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(with) - len(without); got != c.want {
			t.Errorf("a window of three scopes takes %d bytes, want %d: %s", got, c.want, with)
		}
	}
}
