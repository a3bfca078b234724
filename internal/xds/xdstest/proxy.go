// Package xdstest is a minimal ADS client for tests: it speaks the state of
// the world and delta protocols the way an Envoy proxy does, and lets a
// test decide what it subscribes to, by name or to all, and whether each
// response is accepted (ACK) or rejected (NACK). Proxy is one stream of one
// type; ADS and Delta carry every type on one stream, as Envoy's does.
package xdstest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial connects to a plaintext xDS server for the test's duration.
func Dial(t testing.TB, addr string) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	return dial(t, addr, insecure.NewCredentials())
}

// DialTLS connects to an xDS server over mutual TLS, as a fleet's proxy
// does: it presents certPEM and keyPEM (a fleet's client certificate; both
// nil presents none), and verifies that the server is serverName and chains
// to a CA in caPEM.
func DialTLS(t testing.TB, addr, serverName string, certPEM, keyPEM, caPEM []byte) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	return dial(t, addr, credentials.NewTLS(TLSConfig(t, serverName, certPEM, keyPEM, caPEM)))
}

// TLSConfig is the client side of a proxy's mutual TLS.
func TLSConfig(t testing.TB, serverName string, certPEM, keyPEM, caPEM []byte) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate in caPEM")
	}
	cfg := &tls.Config{ServerName: serverName, RootCAs: roots, MinVersion: tls.VersionTLS13}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func dial(t testing.TB, addr string, creds credentials.TransportCredentials) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
}

// DefaultTimeout bounds Next's wait for a response. A server answers within
// milliseconds; a minute without an answer means it is silent, and the test
// fails instead of hanging until the suite's own timeout.
const DefaultTimeout = time.Minute

// Proxy is one proxy's ADS stream for one resource type.
type Proxy struct {
	Stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	Node   *corev3.Node
	// Accepted is the last version the proxy accepted.
	Accepted string
	// Timeout bounds Next's wait (DefaultTimeout when zero). When it passes,
	// the stream is closed.
	Timeout time.Duration
	names   []string
	cancel  context.CancelFunc
}

// Connect opens a stream as proxy id of fleet and asks for typeURL: the
// named resources, or all of them (a wildcard) when names is empty.
func Connect(t testing.TB, c discoveryv3.AggregatedDiscoveryServiceClient, fleet, id, typeURL string, names ...string) *Proxy {
	t.Helper()
	st, cancel := open(t, c.StreamAggregatedResources)
	p := &Proxy{Stream: st, Node: &corev3.Node{Id: id, Cluster: fleet}, names: names, cancel: cancel}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: p.Node, TypeUrl: typeURL, ResourceNames: names}); err != nil {
		t.Fatal(err)
	}
	return p
}

// ConnectDelta opens a delta stream as proxy id of fleet and subscribes to
// typeURL: the named resources, or all of them (a wildcard) when names is
// empty. The test receives and answers on the stream itself; the stream
// ends with the test.
func ConnectDelta(t testing.TB, c discoveryv3.AggregatedDiscoveryServiceClient, fleet, id, typeURL string, names ...string) discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient {
	t.Helper()
	st, _ := open(t, c.DeltaAggregatedResources)
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: id, Cluster: fleet}, TypeUrl: typeURL, ResourceNamesSubscribe: names}); err != nil {
		t.Fatal(err)
	}
	return st
}

// Next receives the next response and answers it: an ACK when nackDetail is
// empty, otherwise a NACK carrying it. It fails, closing the stream, when no
// response comes within the proxy's Timeout.
func (p *Proxy) Next(nackDetail string) (*discoveryv3.DiscoveryResponse, error) {
	resp, err := recvWithin(p.Node.GetId(), p.Timeout, p.cancel, p.Stream.Recv)
	if err != nil {
		return nil, err
	}
	return resp, p.Answer(resp, nackDetail)
}

// Answer ACKs resp, or NACKs it when nackDetail is not empty.
func (p *Proxy) Answer(resp *discoveryv3.DiscoveryResponse, nackDetail string) error {
	req := &discoveryv3.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce(), ResourceNames: p.names}
	if nackDetail != "" {
		// As Envoy does, a NACK repeats the last version the proxy accepted.
		req.VersionInfo = p.Accepted
		req.ErrorDetail = &statuspb.Status{Code: 3, Message: nackDetail}
	} else {
		p.Accepted = resp.GetVersionInfo()
		req.VersionInfo = p.Accepted
	}
	return p.Stream.Send(req)
}

// NextJudged is NextNames for a proxy that judges what it is sent: it
// NACKs a response when nack, given the names of its resources, returns a
// detail, and ACKs it when nack returns "".
func (p *Proxy) NextJudged(nack func(names []string) string) (version string, names []string, err error) {
	resp, err := recvWithin(p.Node.GetId(), p.Timeout, p.cancel, p.Stream.Recv)
	if err != nil {
		return "", nil, err
	}
	if names, err = Names(resp.GetResources()); err != nil {
		return "", nil, err
	}
	return resp.GetVersionInfo(), names, p.Answer(resp, nack(names))
}

// NextNames is Next for a proxy that wants only the names of the resources
// it is sent (clusters, listeners, route configurations, secrets, or the
// cluster names of load assignments), with the response's version.
func (p *Proxy) NextNames(nackDetail string) (version string, names []string, err error) {
	resp, err := p.Next(nackDetail)
	if err != nil {
		return "", nil, err
	}
	names, err = Names(resp.GetResources())
	return resp.GetVersionInfo(), names, err
}
