package publish

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

func TestReportName(t *testing.T) {
	for _, replica := range []string{"kube-envoy-controller-7d9f-abcde", "Host_Name.local", strings.Repeat("x", 300)} {
		name := ShardName(replica, MaxShards-1)
		if len(name) > 253 || strings.ToLower(name) != name || strings.ContainsAny(name, "_ ") {
			t.Errorf("ShardName(%q) = %q", replica, name)
		}
	}
	if ReportName("A_b") == ReportName("a-b") {
		t.Error("two replicas share a report")
	}
}

// longReport returns the report of n fleets with names as long as they may
// be, every tenth rejecting its version with an error_detail of MaxDetail.
func longReport(n int) Report {
	r := Report{}
	for i := range n {
		id := fmt.Sprintf("%s/%s-%06d", strings.Repeat("n", 63), strings.Repeat("e", 246), i)
		f := FleetProxies{Version: "0123456789abcdef", Connected: 3, Acked: 3}
		if i%10 == 0 {
			f.Acked, f.Nacked, f.LastNACK = 0, 3, strings.Repeat("x", MaxDetail)
		}
		r[id] = f
	}
	return r
}

// A report of any size is split into shards that each fit ShardBytes,
// every fleet in exactly one; the same report is the same shards.
func TestReportShards(t *testing.T) {
	for _, n := range []int{0, 1, 100, 2_000} {
		r := longReport(n)
		shards, err := ReportShards("ns", "replica-a", r, 1)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := ReportShards("ns", "replica-a", r, 1)
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
			part, err := ReportFromConfigMap(cm)
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
		if !maps.Equal(got, r) {
			t.Errorf("%d fleets: the shards hold %d fleets", n, len(got))
		}
		if n > 0 {
			t.Logf("%d fleets with the longest names, one in ten rejecting: %d shards, %d bytes, %d bytes a fleet", n, len(shards), total, total/n)
		}
	}
}

// A replica's shards never become fewer while it runs: a report that
// shrinks keeps its layout, and one that grows doubles it.
func TestReportShardsGrow(t *testing.T) {
	small, big := longReport(10), longReport(2_000)
	shards, _ := ReportShards("ns", "r", small, 1)
	if len(shards) != 1 {
		t.Fatalf("ten fleets take %d shards", len(shards))
	}
	grown, _ := ReportShards("ns", "r", big, len(shards))
	if len(grown) < 2 {
		t.Fatalf("%d fleets take %d shard", len(big), len(grown))
	}
	kept, _ := ReportShards("ns", "r", small, len(grown))
	if len(kept) != len(grown) {
		t.Errorf("a shrunk report takes %d shards, was %d", len(kept), len(grown))
	}
}
