package debug

import (
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
)

// Rows turns the tracker's proxies into rows: for each type a proxy asked
// for, current(fleet, typeURL) is the version the replica serves, which the
// proxy has accepted (SYNCED), not yet accepted (STALE) or rejected in its
// last answer (NACKED).
func Rows(proxies []server.ProxyState, current func(fleet, typeURL string) string, replica string) []ProxyRow {
	out := make([]ProxyRow, 0, len(proxies))
	for _, p := range proxies {
		row := ProxyRow{Node: p.Node, Fleet: p.Fleet, Replica: replica, ConnectedSince: p.Since, LastSeen: p.LastSeen, State: Synced}
		for _, k := range resource.Kinds {
			ts, ok := p.Types[k.TypeURL]
			if !ok {
				continue
			}
			st := TypeStatus{Type: k.Field, Current: current(p.Fleet, k.TypeURL), Sent: ts.Sent, Acked: ts.Acked}
			switch {
			case ts.NACK != nil:
				st.State, st.NACKVersion, st.NACK = NACKed, ts.NACK.Version, ts.NACK.Detail
			case st.Acked != "" && st.Acked == st.Current:
				st.State = Synced
			default:
				st.State = Stale
			}
			row.Types = append(row.Types, st)
			row.State = worse(row.State, st.State)
			if st.State == NACKed && row.NACK == "" {
				row.NACK = st.NACK
			}
		}
		if len(row.Types) == 0 {
			row.State = Stale // it asked for nothing yet
		}
		out = append(out, row)
	}
	return out
}

// worse returns the worse of two states: NACKED, then STALE, then SYNCED.
func worse(a, b State) State {
	rank := map[State]int{Synced: 0, Stale: 1, NACKed: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}
