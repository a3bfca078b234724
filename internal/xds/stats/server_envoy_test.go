package stats

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
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
		e, c := rep.Scopes[ScopeHTTP("edge")], rep.Scopes[ScopeCluster("backend")]
		return e.Requests >= uint64(sent) && c.Requests >= uint64(fromBad), nil
	})
	e, c := rep.Scopes[ScopeHTTP("edge")], rep.Scopes[ScopeCluster("backend")]
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
		return rep.Scopes[ScopeCluster("backend-ok")].Requests >= uint64(fromGood), nil
	})
	ok := rep.Scopes[ScopeCluster("backend-ok")]
	e = rep.Scopes[ScopeHTTP("edge")]
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
