package endpoint

import (
	"reflect"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
)

func TestRows(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	seen := since.Add(time.Minute)
	current := map[string]string{resourcev3.ListenerType: "l2", resourcev3.ClusterType: "c2", resourcev3.EndpointType: "e1"}
	versions := func(fleet, typeURL string) string {
		if fleet != "ns/edge" {
			t.Errorf("asked for the versions of %q", fleet)
		}
		return current[typeURL]
	}
	proxy := func(types map[string]server.TypeState) []server.ProxyState {
		return []server.ProxyState{{Node: "edge-1", Fleet: "ns/edge", Since: since, LastSeen: seen, Types: types}}
	}
	tests := []struct {
		name  string
		in    []server.ProxyState
		types []debug.TypeStatus
		state debug.State
		nack  string
	}{
		{"every type acked at the current version", proxy(map[string]server.TypeState{
			resourcev3.ListenerType: {Sent: "l2", Acked: "l2"}, resourcev3.ClusterType: {Sent: "c2", Acked: "c2"},
		}), []debug.TypeStatus{
			{Type: "listeners", Current: "l2", Sent: "l2", Acked: "l2", State: debug.Synced},
			{Type: "clusters", Current: "c2", Sent: "c2", Acked: "c2", State: debug.Synced},
		}, debug.Synced, ""},
		{"sent, not acked yet", proxy(map[string]server.TypeState{
			resourcev3.ListenerType: {Sent: "l2", Acked: "l1"}, resourcev3.ClusterType: {Sent: "c2", Acked: "c2"},
		}), []debug.TypeStatus{
			{Type: "listeners", Current: "l2", Sent: "l2", Acked: "l1", State: debug.Stale},
			{Type: "clusters", Current: "c2", Sent: "c2", Acked: "c2", State: debug.Synced},
		}, debug.Stale, ""},
		{"acked an older version, the current one not sent yet", proxy(map[string]server.TypeState{
			resourcev3.EndpointType: {Sent: "e0", Acked: "e0"},
		}), []debug.TypeStatus{{Type: "endpoints", Current: "e1", Sent: "e0", Acked: "e0", State: debug.Stale}}, debug.Stale, ""},
		{"asked, nothing sent", proxy(map[string]server.TypeState{
			resourcev3.ListenerType: {},
		}), []debug.TypeStatus{{Type: "listeners", Current: "l2", State: debug.Stale}}, debug.Stale, ""},
		{"a NACK is worse than STALE, and its detail is the row's", proxy(map[string]server.TypeState{
			resourcev3.ListenerType: {Sent: "l2", Acked: "l1"},
			resourcev3.ClusterType:  {Sent: "c2", Acked: "c1", NACK: &server.NACK{Version: "c2", Detail: "bad cluster"}},
		}), []debug.TypeStatus{
			{Type: "listeners", Current: "l2", Sent: "l2", Acked: "l1", State: debug.Stale},
			{Type: "clusters", Current: "c2", Sent: "c2", Acked: "c1", State: debug.NACKed, NACKVersion: "c2", NACK: "bad cluster"},
		}, debug.NACKed, "bad cluster"},
		{"asked for nothing yet", proxy(map[string]server.TypeState{}), nil, debug.Stale, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Rows(tt.in, versions, "replica-a")
			want := []debug.ProxyRow{{Node: "edge-1", Fleet: "ns/edge", Replica: "replica-a", ConnectedSince: since, LastSeen: seen,
				Types: tt.types, State: tt.state, NACK: tt.nack}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Rows =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}
