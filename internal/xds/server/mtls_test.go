package server

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"

	fleetid "github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

var testPKI = xdstest.TestPKI

var newAuthority = xdstest.NewAuthority

// startTLSServer runs a server that speaks mutual TLS only, with a server
// certificate for localhost from a.
func startTLSServer(t *testing.T, a pki.Authority) (*Server, string) {
	t.Helper()
	return startTLSServerWith(t, a, nil)
}

// startTLSServerWith is startTLSServer with configure applied to the server
// before it starts.
func startTLSServerWith(t *testing.T, a pki.Authority, configure func(*Server)) (*Server, string) {
	t.Helper()
	config := xdstest.ServerTLS(t, a)
	return startServerWith(t, func(s *Server) {
		s.SetTLS(config, testPKI.TrustDomain)
		if configure != nil {
			configure(s)
		}
	})
}

// dialAs connects with the client certificate of fleet namespace/name from a.
func dialAs(t *testing.T, addr string, a pki.Authority, namespace, name string) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	leaf, err := pki.IssueClient(a, fleetid.ID{Namespace: namespace, Name: name}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	return xdstest.DialTLS(t, addr, "localhost", leaf.Cert, leaf.Key, a.Bundle())
}

func shortProxy(p *xdstest.Proxy) *xdstest.Proxy {
	// A refused stream ends at once; a minute bounds a server that would
	// wrongly stay silent instead.
	p.Timeout = time.Minute
	return p
}

// A fleet's certificate gets its fleet's resources, over both protocols.
func TestMTLSServesTheCertificatesFleet(t *testing.T) {
	a := newAuthority(t)
	s, addr := startTLSServer(t, a)
	mustPublish(t, s, "v1", clusters("a", "b"))
	p := shortProxy(xdstest.Connect(t, dialAs(t, addr, a, "ns", "edge"), fleet, "pod-1", resourcev3.ClusterType))
	if _, names, err := p.NextNames(""); err != nil || len(names) != 2 {
		t.Fatalf("the fleet's own proxy got %v, %v; want clusters a and b", names, err)
	}

	st := xdstest.ConnectDelta(t, dialAs(t, addr, a, "ns", "edge"), fleet, "pod-2", resourcev3.ClusterType)
	if resp, err := st.Recv(); err != nil || len(resp.GetResources()) != 2 {
		t.Fatalf("delta: %v, %v", resp, err)
	}
}

// Fleet A's certificate, claiming fleet B, gets nothing of B: neither its
// clusters nor its secrets, over either protocol.
func TestMTLSRefusesAnotherFleet(t *testing.T) {
	ctx := context.Background()
	a := newAuthority(t)
	s, addr := startTLSServer(t, a)
	if err := s.SetFleet(ctx, "ns/other", "v1", secrets("b-key")); err != nil {
		t.Fatal(err)
	}
	refused := refusals(t, refusedIdentity)
	asEdge := dialAs(t, addr, a, "ns", "edge")
	for _, typ := range []string{resourcev3.ClusterType, resourcev3.SecretType} {
		p := shortProxy(xdstest.Connect(t, asEdge, "ns/other", "pod-1", typ, namesFor(typ)...))
		resp, err := p.Next("")
		if resp != nil {
			t.Errorf("%s: fleet edge's certificate was sent fleet other's %v", typ, resp.GetResources())
		}
		wantCode(t, "sotw "+typ, err, codes.PermissionDenied)
	}
	st := xdstest.ConnectDelta(t, asEdge, "ns/other", "pod", resourcev3.SecretType, "b-key")
	resp, err := st.Recv()
	if resp != nil {
		t.Errorf("delta: sent %v", resp.GetResources())
	}
	wantCode(t, "delta", err, codes.PermissionDenied)
	if got := refusals(t, refusedIdentity) - refused; got != 3 {
		t.Errorf("%v identity refusals counted, want 3", got)
	}
	// Its own fleet's secret, by name, it gets.
	if err := s.SetFleet(ctx, fleet, "v1", secrets("a-key")); err != nil {
		t.Fatal(err)
	}
	p := shortProxy(xdstest.Connect(t, asEdge, fleet, "pod-1", resourcev3.SecretType, "a-key"))
	if _, names, err := p.NextNames(""); err != nil || len(names) != 1 || names[0] != "a-key" {
		t.Errorf("its own secret: %v, %v", names, err)
	}
}

func namesFor(typ string) []string {
	if typ == resourcev3.SecretType {
		return []string{"b-key"}
	}
	return nil
}

// A client without a certificate, or with one from another CA, gets nothing,
// whatever fleet it claims.
func TestMTLSRefusesUnverifiedClients(t *testing.T) {
	a := newAuthority(t)
	s, addr := startTLSServer(t, a)
	mustPublish(t, s, "v1", clusters("a"))
	stranger := newAuthority(t)
	foreign, err := pki.IssueClient(stranger, fleetid.ID{Namespace: "ns", Name: "edge"}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]discoveryv3.AggregatedDiscoveryServiceClient{
		"no certificate":           xdstest.DialTLS(t, addr, "localhost", nil, nil, a.Bundle()),
		"another CA's certificate": xdstest.DialTLS(t, addr, "localhost", foreign.Cert, foreign.Key, a.Bundle()),
		"plaintext":                xdstest.Dial(t, addr),
	}
	for name, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		st, err := c.StreamAggregatedResources(ctx)
		if err == nil {
			if err = st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "pod", Cluster: fleet}, TypeUrl: resourcev3.ClusterType}); err == nil {
				var resp *discoveryv3.DiscoveryResponse
				resp, err = st.Recv()
				if resp != nil {
					t.Errorf("%s: got a response: %v", name, resp.GetResources())
				}
			}
		}
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Errorf("%s: err = %v, want a failed connection (not a timeout)", name, err)
		}
	}
	// The fleet's own proxy, beside them, is served.
	p := shortProxy(xdstest.Connect(t, dialAs(t, addr, a, "ns", "edge"), fleet, "pod-1", resourcev3.ClusterType))
	if _, names, err := p.NextNames(""); err != nil || len(names) != 1 {
		t.Errorf("the fleet's proxy: %v, %v", names, err)
	}
}

// A stream keeps the node of its first request: a request that names
// another node, or another fleet its certificate allows, ends it.
func TestNodeCannotChangeOnItsStream(t *testing.T) {
	a := newAuthority(t)
	s, addr := startTLSServer(t, a)
	mustPublish(t, s, "v1", clusters("a"))
	for name, next := range map[string]*corev3.Node{
		"another node id": {Id: "pod-2", Cluster: fleet},
		"another fleet":   {Id: "pod-1", Cluster: "ns/other"},
	} {
		p := shortProxy(xdstest.Connect(t, dialAs(t, addr, a, "ns", "edge"), fleet, "pod-1", resourcev3.ClusterType))
		if _, err := p.Next(""); err != nil {
			t.Fatalf("%s: first response: %v", name, err)
		}
		if err := p.Stream.Send(&discoveryv3.DiscoveryRequest{Node: next, TypeUrl: resourcev3.ClusterType}); err != nil {
			t.Fatal(err)
		}
		resp, err := p.Next("")
		if resp != nil {
			t.Errorf("%s: answered with %v", name, resp.GetResources())
		}
		wantCode(t, name, err, codes.PermissionDenied)
	}
}

// In plaintext, the node is taken at its word, but it cannot change either.
func TestPlaintextNodeCannotChange(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a"))
	p := shortProxy(xdstest.Connect(t, xdstest.Dial(t, addr), fleet, "pod-1", resourcev3.ClusterType))
	if _, err := p.Next(""); err != nil {
		t.Fatal(err)
	}
	if err := p.Stream.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "pod-1", Cluster: "ns/other"}, TypeUrl: resourcev3.ClusterType}); err != nil {
		t.Fatal(err)
	}
	_, err := p.Next("")
	wantCode(t, "plaintext", err, codes.PermissionDenied)
}
