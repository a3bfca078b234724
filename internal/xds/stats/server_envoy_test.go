package stats

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
)

// The Receiver served on the operator's xDS server's own port
// (server.AddService, as the operator runs it): a real Envoy of a fleet,
// started from the fleet's bootstrap with the stats sink over its xDS
// cluster, streams its figures over the mutual TLS connection of its ADS
// stream, and the Receiver records them by its node id, exactly as Envoy
// counted them. ADS goes on over that one connection: a new publication is
// served, applied and acknowledged, and the figures of the cluster it
// brings come as well.
func TestRealEnvoyReportsOnTheXDSServersPort(t *testing.T) {
	bin := realenvoy.Require(t)
	g := newRig(t)
	srv := g.srv
	// Kept, beside the inclusion list, to count the connections to the
	// xDS server; the Receiver drops them.
	g.keep = []string{`^cluster\.xds_cluster\.upstream_(cx|rq)_total$`}
	bad := g.backend503(t)
	good := backendAnswering(t, http.StatusOK, "backend says ok")
	ports, err := realenvoy.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	edge := ports[0]
	ctx := context.Background()
	setFleet := func(version, cluster string, backendPort uint32) {
		t.Helper()
		if err := srv.SetFleet(ctx, fleet, version, edgeResources(edge, cluster, backendPort)); err != nil {
			t.Fatal(err)
		}
	}
	setFleet("v1", "backend", bad.port)
	p := g.run(t, bin, "pod-1", fleet, true)

	// Every request Envoy answered counts, its own 503s while it has no
	// listener yet among them.
	var sent int
	get := func() string {
		status, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/", edge))
		if err == nil && status != 0 {
			sent++
		}
		return body
	}
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "Envoy to route to the 503 backend", func() (bool, error) {
		return get() == backendBody, nil
	})
	for range 20 {
		if body := get(); body != backendBody {
			t.Fatalf("through Envoy: %q", body)
		}
	}
	fromBad := int(bad.served.Load())
	var rep Report
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "the receiver to hold pod-1's requests", func() (bool, error) {
		rep, _ = g.r.Report(fleet, "pod-1")
		e, c := rep.Scopes[analysis.ScopeHTTP("edge")], rep.Scopes[analysis.ScopeCluster("backend")]
		return e.Requests >= uint64(sent) && c.Requests >= uint64(fromBad), nil
	})
	e, c := rep.Scopes[analysis.ScopeHTTP("edge")], rep.Scopes[analysis.ScopeCluster("backend")]
	t.Logf("v1: pod-1 reported %d times: edge %d requests, %d 5xx, %d durations; backend %d requests, %d 5xx",
		rep.Reports, e.Requests, e.Errors5xx, e.Duration.Count(), c.Requests, c.Errors5xx)
	if e.Requests != uint64(sent) || e.Errors5xx != uint64(sent) || c.Requests != uint64(fromBad) || c.Errors5xx != uint64(fromBad) {
		t.Errorf("edge %+v, backend %+v: want the %d requests sent, all 503, %d of them the backend's", e, c, sent, fromBad)
	}
	if envoySays, err := p.Stat(ctx, "http.edge.downstream_rq_5xx"); err != nil || envoySays != int64(sent) {
		t.Errorf("Envoy counted %d 5xx on edge (%v), want the %d sent", envoySays, err, sent)
	}

	// ADS, on the same connection, serves the next publication.
	setFleet("v2", "backend-ok", good.port)
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "Envoy to route to the good backend", func() (bool, error) {
		return get() == "backend says ok", nil
	})
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "pod-1 to acknowledge v2", func() (bool, error) {
		got := srv.ProxyReport()[fleet]
		return got.Version == "v2" && got.Connected == 1 && got.Acked == 1 && got.Nacked == 0, nil
	})
	fromGood := int(good.served.Load())
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "the receiver to hold pod-1's requests of v2", func() (bool, error) {
		rep, _ = g.r.Report(fleet, "pod-1")
		return rep.Scopes[analysis.ScopeCluster("backend-ok")].Requests >= uint64(fromGood), nil
	})
	ok := rep.Scopes[analysis.ScopeCluster("backend-ok")]
	e = rep.Scopes[analysis.ScopeHTTP("edge")]
	t.Logf("v2: pod-1 reported %d times: edge %d requests, %d 5xx; backend-ok %d requests, %d 5xx; %d metrics dropped",
		rep.Reports, e.Requests, e.Errors5xx, ok.Requests, ok.Errors5xx, rep.Dropped)
	if ok.Requests != uint64(fromGood) || ok.Errors5xx != 0 {
		t.Errorf("backend-ok %+v: want the %d requests it served, none 5xx", ok, fromGood)
	}
	if !rep.Connected {
		t.Error("pod-1's stats stream is not open")
	}
	// One connection carries ADS and the stats stream: two streams.
	cx, err := p.Stat(ctx, "cluster.xds_cluster.upstream_cx_total")
	if err != nil {
		t.Fatal(err)
	}
	rq, err := p.Stat(ctx, "cluster.xds_cluster.upstream_rq_total")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Envoy opened %d connection(s) to the xDS server, with %d stream(s)", cx, rq)
	if cx != 1 || rq != 2 {
		t.Errorf("Envoy opened %d connections and %d streams to the xDS server, want one connection for ADS and the stats stream", cx, rq)
	}
	if n := g.r.Refused(RefusedCertificate) + g.r.Refused(RefusedIdentity); n != 0 {
		t.Errorf("the receiver refused %d streams, want none", n)
	}
}

// A real Envoy of a fleet that rolls out: the server's report
// (ProxyReport, what the replica writes for the leader) carries, with
// its answer, its window: the requests and the 5xx it really served since
// it accepted the previous revision, which sends them to a backend that
// answers 503. Once the step leads it and it accepts the new revision,
// its window begins again, empty, and then holds what it served of the
// new revision alone.
func TestRealEnvoyWindowInARollout(t *testing.T) {
	bin := realenvoy.Require(t)
	g := newRig(t)
	srv := g.srv
	bad := g.backend503(t)
	good := backendAnswering(t, http.StatusOK, "backend says ok")
	ports, err := realenvoy.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	edge := ports[0]
	ctx := context.Background()
	// v2 rolls out after v1; a Cut of "" leads no proxy, the largest every one.
	rollout := func(cut string) {
		t.Helper()
		previous := &server.Staged{Version: "v1", Resources: edgeResources(edge, "backend", bad.port),
			Rollout: publish.Rollout{Revision: "v2", Previous: "v1", Phase: publish.RolloutProgressing, Cut: cut}}
		if err := srv.SetFleetRollout(ctx, fleet, "v2", edgeResources(edge, "backend-ok", good.port), previous); err != nil {
			t.Fatal(err)
		}
	}
	rollout("")
	g.run(t, bin, "pod-1", fleet, true)

	answer := func() publish.ProxyAnswer { return srv.ProxyReport()[fleet].Proxies["pod-1"] }
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "pod-1 to accept v1, its stats to come", func() (bool, error) {
		a := answer()
		return a.Acked == "v1" && a.Window != nil, nil
	})
	// The proxy's own streams to the xDS server count in its xDS
	// cluster's scope, which the windows leave out (BootstrapScopes): the
	// window holds the fleet's traffic alone.
	traffic := func(w *publish.Window) []string { return slices.Sorted(maps.Keys(w.Scopes)) }
	if rep, _ := g.r.Report(fleet, "pod-1"); rep.Scopes[analysis.ScopeCluster("xds_cluster")].Requests == 0 {
		t.Errorf("pod-1's record: %v, want its xDS cluster's requests", rep.Scopes)
	}
	if w := answer().Window; len(traffic(w)) != 0 {
		t.Fatalf("pod-1's window before any request: %+v", w)
	}

	// Each request on a connection of its own: Envoy serves it with the
	// listener it runs when it comes.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	var sent, sent5xx uint64
	get := func() string {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/", edge))
		if err != nil {
			return ""
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		sent++
		if resp.StatusCode >= 500 {
			sent5xx++
		}
		return string(body)
	}
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "Envoy to route to the 503 backend", func() (bool, error) {
		return get() == backendBody, nil
	})
	for range 20 {
		get()
	}
	var w *publish.Window
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "pod-1's window to hold its requests", func() (bool, error) {
		w = answer().Window
		return w != nil && w.Scopes[analysis.ScopeHTTP("edge")].Requests >= sent && w.Scopes[analysis.ScopeCluster("backend")].Requests >= uint64(bad.served.Load()), nil
	})
	e, b := w.Scopes[analysis.ScopeHTTP("edge")], w.Scopes[analysis.ScopeCluster("backend")]
	t.Logf("v1: pod-1's window: %d reports; edge %d requests, %d 5xx; backend %d requests, %d 5xx", w.Reports, e.Requests, e.Errors5xx, b.Requests, b.Errors5xx)
	if e.Requests != sent || e.Errors5xx != sent5xx || sent5xx != sent || e.Duration.Count() != sent {
		t.Errorf("edge %+v: want the %d requests sent, all answered 5xx (%d)", e, sent, sent5xx)
	}
	if served := uint64(bad.served.Load()); b.Requests != served || b.Errors5xx != served {
		t.Errorf("backend %+v: want the %d requests the backend served, all 503", b, served)
	}
	if got := traffic(w); !slices.Equal(got, []string{analysis.ScopeCluster("backend"), analysis.ScopeHTTP("edge")}) || w.Reports == 0 {
		t.Errorf("pod-1's window of %d reports, scopes %v: want edge and backend, and its reports", w.Reports, got)
	}

	// The step leads pod-1: it is served v2, accepts it, and its window
	// begins again.
	rollout("ffffffffffffffff")
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "pod-1 to accept v2", func() (bool, error) {
		w = answer().Window
		return answer().Acked == "v2" && w != nil, nil
	})
	if got := traffic(w); len(got) != 0 {
		t.Errorf("pod-1's window once it accepted v2, before any request: %v, want none of v1's", got)
	}
	// The window begins at pod-1's first flush after it accepted v2 (that
	// flush may hold requests of v1): what is sent after that counts.
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "pod-1's window of v2 to begin", func() (bool, error) {
		w = answer().Window
		return w != nil && w.Reports >= 1, nil
	})
	if got := traffic(w); len(got) != 0 {
		t.Errorf("pod-1's window of v2, before any request: %v", got)
	}
	sent, sent5xx = 0, 0
	for range 20 {
		get()
	}
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "pod-1's window of v2 to hold its requests", func() (bool, error) {
		w = answer().Window
		return w != nil && w.Scopes[analysis.ScopeHTTP("edge")].Requests >= sent, nil
	})
	e, ok := w.Scopes[analysis.ScopeHTTP("edge")], w.Scopes[analysis.ScopeCluster("backend-ok")]
	t.Logf("v2: pod-1's window: %d reports; edge %d requests, %d 5xx; backend-ok %d requests", w.Reports, e.Requests, e.Errors5xx, ok.Requests)
	if e.Requests != sent || e.Errors5xx != sent5xx || sent5xx != 0 {
		t.Errorf("edge %+v: want the %d requests sent since v2, none 5xx (%d)", e, sent, sent5xx)
	}
	if served := uint64(good.served.Load()); ok.Requests != served || served != sent {
		t.Errorf("backend-ok %+v: want the %d requests sent, which it served (%d)", ok, sent, served)
	}
	if got := traffic(w); !slices.Equal(got, []string{analysis.ScopeCluster("backend-ok"), analysis.ScopeHTTP("edge")}) {
		t.Errorf("pod-1's window of v2 has scopes %v, want edge and backend-ok alone", got)
	}
	// The fleet no longer rolls out: no answers, no windows.
	if err := srv.SetFleet(ctx, fleet, "v2", edgeResources(edge, "backend-ok", good.port)); err != nil {
		t.Fatal(err)
	}
	if got := srv.ProxyReport()[fleet]; got.Proxies != nil {
		t.Errorf("a settled fleet's report lists its proxies: %+v", got)
	}
}
