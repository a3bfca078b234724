// Package standin is stand-in proxies of a fleet: real ADS clients, over the
// fleet's mutual TLS, that subscribe as a proxy does, accept every response
// and say so. KWOK's pods run no Envoy; these do its part towards the xDS
// server. The xDS benchmark's load clients (test/bench) are these, and so
// are the proxies make run starts for the gateway sample (hack/standin).
//
// A stand-in speaks ADS over one stream, state of the world or delta, and
// answers every response with an ACK: it never judges the configuration it
// is sent, as an Envoy would.
package standin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	// The TLS contexts, in listeners' and clusters' typed configurations,
	// that name SDS secrets.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Files of a fleet's client certificate Secret, as its pods mount them.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

// Subscription is what a proxy asks for: the resources of one type, by name,
// or all of them (a wildcard) when Names is empty.
type Subscription struct {
	TypeURL string
	Names   []string
	// Named asks, instead of Names, for the resources of its type that the
	// accepted listeners and clusters (the kinds a proxy holds all of)
	// name, once they name any (resource.Subscribed): e.g. the secrets of
	// their TLS contexts over SDS. State of the world only.
	Named bool
}

// Everything is what a fleet's proxy asks for, as the bootstrap sends it to
// ADS for everything: every cluster, endpoint, listener and route (a
// wildcard), and the secrets its listeners and clusters name (SDS over ADS),
// asked for by name once they are known, as Envoy does.
//
// It asks for every type the server serves (resource.Kinds), in the order
// of a push, by name those served by name only.
func Everything() []Subscription {
	subs := make([]Subscription, 0, len(resource.Kinds))
	for _, i := range resource.PushOrder {
		k := resource.Kinds[i]
		subs = append(subs, Subscription{TypeURL: k.TypeURL, Named: k.ByName})
	}
	return subs
}

// Report is told of each response after its ACK was sent: its type, its
// version (the system version of a delta response) and its size on the wire.
type Report func(typeURL, version string, size int)

// Credentials is a fleet's side of mutual TLS: the client certificate and
// key of its Secret, and the CAs that the xDS server's certificate, issued
// for serverName, must chain to.
func Credentials(cert, key, ca []byte, serverName string) (credentials.TransportCredentials, error) {
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no CA certificate in the fleet's %s", CAFile)
	}
	return credentials.NewTLS(&tls.Config{ServerName: serverName, RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}), nil
}

// CredentialsFromDir is Credentials from the files in dir, as the kubelet
// mounts the fleet's Secret; with no dir, plaintext.
func CredentialsFromDir(dir, serverName string) (credentials.TransportCredentials, error) {
	if dir == "" {
		return insecure.NewCredentials(), nil
	}
	var files [3][]byte
	for i, f := range []string{CertFile, KeyFile, CAFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		files[i] = b
	}
	return Credentials(files[0], files[1], files[2], serverName)
}

// SotW runs node's state-of-the-world ADS stream on c until it ends or ctx
// is done: one request for each subscription, then an ACK of every
// response, reported once sent. A Named subscription is sent once the
// accepted listeners and clusters name some resources, and again when the
// names change.
func SotW(ctx context.Context, c discoveryv3.AggregatedDiscoveryServiceClient, node *corev3.Node, subs []Subscription, report Report) error {
	st, err := c.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	names := map[string][]string{}
	named := map[string]bool{}            // types asked for by the names the configuration holds
	accepted := map[string][]*anypb.Any{} // listeners and clusters (Wildcard kinds), as last accepted
	last := map[string]*discoveryv3.DiscoveryResponse{}
	first := true
	send := func(typeURL string) error {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names[typeURL]}
		if r := last[typeURL]; r != nil {
			req.VersionInfo, req.ResponseNonce = r.GetVersionInfo(), r.GetNonce()
		}
		if first {
			req.Node = node // Envoy sends its node once, on its first request
			first = false
		}
		return st.Send(req)
	}
	for _, s := range subs {
		if s.Named {
			named[s.TypeURL] = true
			continue
		}
		names[s.TypeURL] = s.Names
		if err := send(s.TypeURL); err != nil {
			return err
		}
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		typ := resp.GetTypeUrl()
		last[typ] = resp
		if err := send(typ); err != nil {
			return err
		}
		report(typ, resp.GetVersionInfo(), proto.Size(resp))
		if !resource.KindOf(typ).Wildcard {
			continue
		}
		accepted[typ] = resp.GetResources()
		wanted := namedBy(accepted)
		for t := range named {
			want := wanted[t]
			if _, asked := names[t]; (asked || len(want) > 0) && !slices.Equal(want, names[t]) {
				names[t] = want
				if err := send(t); err != nil {
					return err
				}
			}
		}
	}
}

// namedBy returns, by type and sorted, the names that the resources of
// accepted name of the kinds a proxy asks for by name (resource.Subscribed).
func namedBy(accepted map[string][]*anypb.Any) map[string][]string {
	var ms []types.Resource
	for _, t := range slices.Sorted(maps.Keys(accepted)) {
		for _, a := range accepted[t] {
			if m, err := a.UnmarshalNew(); err == nil {
				ms = append(ms, m)
			}
		}
	}
	out := resource.Subscribed(ms)
	for _, names := range out {
		slices.Sort(names)
	}
	return out
}

// Delta runs node's delta ADS stream on c until it ends or ctx is done: one
// subscription request for each, then an ACK of every response, reported
// once sent.
func Delta(ctx context.Context, c discoveryv3.AggregatedDiscoveryServiceClient, node *corev3.Node, subs []Subscription, report Report) error {
	st, err := c.DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	for i, s := range subs {
		if s.Named {
			return fmt.Errorf("a delta stream cannot ask for %s by the names the configuration holds", s.TypeURL)
		}
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: s.TypeURL, ResourceNamesSubscribe: s.Names}
		if i == 0 {
			req.Node = node
		}
		if err := st.Send(req); err != nil {
			return err
		}
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}); err != nil {
			return err
		}
		report(resp.GetTypeUrl(), resp.GetSystemVersionInfo(), proto.Size(resp))
	}
}
