package endpoint

import (
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
)

// Rows turns the tracker's proxies into rows: for each type a proxy asked
// for, current(fleet, typeURL) is the type's version in the fleet's current
// publication on the replica, which the proxy has accepted (SYNCED), not
// yet accepted (STALE) or rejected in its last answer (NACKED).
func Rows(proxies []server.ProxyState, current func(fleet, typeURL string) string, replica string) []debug.ProxyRow {
	out := make([]debug.ProxyRow, 0, len(proxies))
	for _, p := range proxies {
		row := debug.ProxyRow{Node: p.Node, Fleet: p.Fleet, Replica: replica, ConnectedSince: p.Since, LastSeen: p.LastSeen, State: debug.Synced}
		for _, k := range resource.Kinds {
			ts, ok := p.Types[k.TypeURL]
			if !ok {
				continue
			}
			st := debug.TypeStatus{Type: k.Field, Current: current(p.Fleet, k.TypeURL), Sent: ts.Sent, Acked: ts.Acked}
			switch {
			case ts.NACK != nil:
				st.State, st.NACKVersion, st.NACK = debug.NACKed, ts.NACK.Version, ts.NACK.Detail
			case st.Acked != "" && st.Acked == st.Current:
				st.State = debug.Synced
			default:
				st.State = debug.Stale
			}
			row.Types = append(row.Types, st)
			row.State = worse(row.State, st.State)
			if st.State == debug.NACKed && row.NACK == "" {
				row.NACK = st.NACK
			}
		}
		if len(row.Types) == 0 {
			row.State = debug.Stale // it asked for nothing yet
		}
		out = append(out, row)
	}
	return out
}

// worse returns the worse of two states: NACKED, then STALE, then SYNCED.
func worse(a, b debug.State) debug.State {
	rank := map[debug.State]int{debug.Synced: 0, debug.Stale: 1, debug.NACKed: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}
