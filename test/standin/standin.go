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
	"os"
	"path/filepath"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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
	// Named asks, instead of Names, for the resources that the accepted
	// listeners and clusters name, once they name any: the secrets of their
	// TLS contexts (SdsSecretConfig). State of the world only.
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
	accepted := map[string][]*anypb.Any{} // listeners and clusters, as last accepted
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
		if typ != resourcev3.ListenerType && typ != resourcev3.ClusterType {
			continue
		}
		accepted[typ] = resp.GetResources()
		want := secretNames(append(slices.Clone(accepted[resourcev3.ListenerType]), accepted[resourcev3.ClusterType]...))
		for t := range named {
			if _, asked := names[t]; (asked || len(want) > 0) && !slices.Equal(want, names[t]) {
				names[t] = want
				if err := send(t); err != nil {
					return err
				}
			}
		}
	}
}

// secretNames returns, sorted, the names of the SDS secrets that resources
// name: every SdsSecretConfig in them, inside typed configurations too.
func secretNames(resources []*anypb.Any) []string {
	seen := map[string]bool{}
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if m.Descriptor().FullName() == "envoy.extensions.transport_sockets.tls.v3.SdsSecretConfig" {
			if n := m.Get(m.Descriptor().Fields().ByName("name")).String(); n != "" {
				seen[n] = true
			}
			return
		}
		if a, ok := m.Interface().(*anypb.Any); ok {
			if inner, err := a.UnmarshalNew(); err == nil {
				walk(inner.ProtoReflect())
			}
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
			case fd.IsList():
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap():
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool { walk(mv.Message()); return true })
				}
			default:
				walk(v.Message())
			}
			return true
		})
	}
	for _, r := range resources {
		if m, err := r.UnmarshalNew(); err == nil {
			walk(m.ProtoReflect())
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
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
