//go:build bench

package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	// The HTTP connection manager in Contour's listeners, whose RDS names
	// the proxy reads.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// An Envoy that `contour bootstrap` configured does not use ADS: its
// bootstrap and every resource Contour serves name a gRPC config source
// (api_type GRPC) of the static cluster "contour", and Envoy makes a
// subscription of its own, with a gRPC stream of its own, for each config
// source it meets: all on one HTTP/2 connection to Contour. A real Envoy
// (1.40) against Contour opened RTDS for the runtime layer "dynamic" and CDS
// for every cluster, then one EDS stream for each cluster's EDS service
// name, then, once the clusters were initialised, LDS for every listener,
// then one RDS stream for each route configuration its listeners name (and
// it would open one SDS stream for each secret they name); and it sent its
// node with every request (envoyNode). contourProxy is such an Envoy, as
// the xDS benchmark's load client against Contour: it ACKs every response
// and reports the ACKs of EDS, the type a benchmark round changes.
//
// delta makes every stream a delta stream (DeltaClusters, ...). An Envoy
// bootstrapped by Contour never does so: Contour's bootstrap and resources
// say GRPC, state of the world. Contour's server (go-control-plane) serves
// delta on the same services; the rows in delta measure that server as an
// Envoy configured for delta would find it.

// perTypeMethods are the gRPC methods of each type's own discovery service:
// state of the world, then delta.
var perTypeMethods = map[string][2]string{
	resourcev3.ClusterType:  {"/envoy.service.cluster.v3.ClusterDiscoveryService/StreamClusters", "/envoy.service.cluster.v3.ClusterDiscoveryService/DeltaClusters"},
	resourcev3.EndpointType: {"/envoy.service.endpoint.v3.EndpointDiscoveryService/StreamEndpoints", "/envoy.service.endpoint.v3.EndpointDiscoveryService/DeltaEndpoints"},
	resourcev3.ListenerType: {"/envoy.service.listener.v3.ListenerDiscoveryService/StreamListeners", "/envoy.service.listener.v3.ListenerDiscoveryService/DeltaListeners"},
	resourcev3.RouteType:    {"/envoy.service.route.v3.RouteDiscoveryService/StreamRoutes", "/envoy.service.route.v3.RouteDiscoveryService/DeltaRoutes"},
	resourcev3.SecretType:   {"/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets", "/envoy.service.secret.v3.SecretDiscoveryService/DeltaSecrets"},
	resourcev3.RuntimeType:  {"/envoy.service.runtime.v3.RuntimeDiscoveryService/StreamRuntime", "/envoy.service.runtime.v3.RuntimeDiscoveryService/DeltaRuntime"},
}

// envoyNode is the node of an Envoy 1.40 (Envoy's official build), as it
// describes itself: with the 516 extensions it was built with, 390 of them
// with a type URL, 61 KB in all (proto.Size of the node read from a real
// Envoy's config dump). Contour's bootstrap leaves
// set_node_on_first_message_only unset, so its Envoys send their node with
// every request of every stream, ACKs included; contourProxy does too, with
// extensions of the same number and sizes, and made-up names.
func envoyNode(id, cluster string) *corev3.Node {
	return &corev3.Node{Id: id, Cluster: cluster, UserAgentName: "envoy",
		UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
			Version: &typev3.SemanticVersion{MajorNumber: 1, MinorNumber: 40}}},
		Extensions: envoyExtensions()}
}

// envoyExtensions are the extensions of envoyNode, made once and shared by
// every node (they are only read).
var envoyExtensions = sync.OnceValue(func() []*corev3.Extension {
	var out []*corev3.Extension
	for i := range 516 {
		e := &corev3.Extension{Name: fmt.Sprintf("envoy.extension.made.up.%012d", i), Category: "envoy.made.up.category"}
		if i < 390 {
			e.TypeUrls = []string{fmt.Sprintf("envoy.extensions.made.up.v3.MadeUpConfig.%029d", i)}
		}
		out = append(out, e)
	}
	return out
})

// contourRuntimeLayer is the RTDS layer Contour's bootstrap names.
const contourRuntimeLayer = "dynamic"

// contourProxy is one Envoy of Contour's, on its own connection.
type contourProxy struct {
	cc    grpc.ClientConnInterface
	node  *corev3.Node
	delta bool
	// nodeOnce sends the node on each stream's first request only, as an
	// Envoy does whose bootstrap sets set_node_on_first_message_only
	// (Contour's does not).
	nodeOnce bool
	// report is told of an EDS ACK, once the proxy is ready: its version,
	// the response's size and when the ACK was sent.
	report func(version string, size int, sent time.Time)

	mu      sync.Mutex
	streams map[streamKey]*typeStream
	// held is what the proxy holds of each type, by name.
	held  map[string]map[string]*anypb.Any
	ready bool // every stream has had a response, every cluster its endpoints
	// pending is the newest EDS ACK, reported once the proxy is ready.
	pending *ack
	errc    chan error
}

// streamKey names a subscription: its type, and the one resource it asks
// for ("" for all of them).
type streamKey struct{ typeURL, name string }

// typeStream is the stream of one subscription.
type typeStream struct {
	streamKey
	st     grpc.ClientStream
	cancel context.CancelFunc
	acked  bool
	// State of the world: the last response, which the next request
	// acknowledges.
	last *discoveryv3.DiscoveryResponse
}

// runContourProxy runs one proxy until one of its streams fails, and
// returns that error.
func runContourProxy(ctx context.Context, cc grpc.ClientConnInterface, node *corev3.Node, delta, nodeOnce bool, report func(version string, size int, sent time.Time)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &contourProxy{cc: cc, node: node, delta: delta, nodeOnce: nodeOnce, report: report, streams: map[streamKey]*typeStream{},
		held: map[string]map[string]*anypb.Any{}, errc: make(chan error, 1)}
	p.mu.Lock()
	var err error
	// RTDS and CDS first; LDS once the clusters are initialised (follow).
	for _, k := range []streamKey{{resourcev3.RuntimeType, contourRuntimeLayer}, {resourcev3.ClusterType, ""}} {
		if err = p.open(ctx, k); err != nil {
			break
		}
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	return <-p.errc
}

// open opens the stream of subscription k, and receives on it. p.mu is
// held: every send of the proxy is made holding it, as a gRPC stream takes
// one sender at a time.
func (p *contourProxy) open(ctx context.Context, k streamKey) error {
	method := perTypeMethods[k.typeURL][0]
	if p.delta {
		method = perTypeMethods[k.typeURL][1]
	}
	ctx, cancel := context.WithCancel(ctx)
	st, err := p.cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		cancel()
		return err
	}
	s := &typeStream{streamKey: k, st: st, cancel: cancel}
	p.streams[k] = s
	var names []string
	if k.name != "" {
		names = []string{k.name}
	}
	// Each stream is a subscription of its own; every request carries the
	// node (envoyNode).
	if p.delta {
		err = st.SendMsg(&discoveryv3.DeltaDiscoveryRequest{Node: p.node, TypeUrl: k.typeURL, ResourceNamesSubscribe: names})
	} else {
		err = st.SendMsg(&discoveryv3.DiscoveryRequest{Node: p.node, TypeUrl: k.typeURL, ResourceNames: names})
	}
	if err != nil {
		return err
	}
	go p.receive(ctx, s)
	return nil
}

// again is the node of a stream's request after its first: nil with
// nodeOnce.
func (p *contourProxy) again() *corev3.Node {
	if p.nodeOnce {
		return nil
	}
	return p.node
}

func (p *contourProxy) fail(err error) {
	select {
	case p.errc <- err:
	default:
	}
}

// receive ACKs every response of s, then updates what the proxy holds and
// the subscriptions it has.
func (p *contourProxy) receive(ctx context.Context, s *typeStream) {
	for {
		var (
			version string
			size    int
			sent    time.Time
			err     error
			got     []*anypb.Any
			removed []string
		)
		if p.delta {
			resp := &discoveryv3.DeltaDiscoveryResponse{}
			if err = s.st.RecvMsg(resp); err != nil {
				p.closed(s, err)
				return
			}
			p.mu.Lock()
			err = s.st.SendMsg(&discoveryv3.DeltaDiscoveryRequest{Node: p.again(), TypeUrl: s.typeURL, ResponseNonce: resp.GetNonce()})
			sent = time.Now()
			version, size = resp.GetSystemVersionInfo(), proto.Size(resp)
			for _, r := range resp.GetResources() {
				got = append(got, r.GetResource())
			}
			removed = resp.GetRemovedResources()
		} else {
			resp := &discoveryv3.DiscoveryResponse{}
			if err = s.st.RecvMsg(resp); err != nil {
				p.closed(s, err)
				return
			}
			p.mu.Lock()
			var names []string
			if s.name != "" {
				names = []string{s.name}
			}
			s.last = resp
			err = s.st.SendMsg(&discoveryv3.DiscoveryRequest{Node: p.again(), TypeUrl: s.typeURL, ResourceNames: names,
				VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})
			sent = time.Now()
			version, size = resp.GetVersionInfo(), proto.Size(resp)
			got = resp.GetResources()
			if s.name == "" {
				// A state-of-the-world response of all the clusters or
				// listeners holds every one of them.
				p.held[s.typeURL] = nil
			}
		}
		if err != nil {
			p.mu.Unlock()
			p.fail(err)
			return
		}
		s.acked = true
		held := p.held[s.typeURL]
		if held == nil {
			held = map[string]*anypb.Any{}
			p.held[s.typeURL] = held
		}
		for _, r := range got {
			held[resourceName(r)] = r
		}
		for _, name := range removed {
			delete(held, name)
		}
		if s.name == "" || s.typeURL == resourcev3.EndpointType {
			if err := p.follow(ctx); err != nil {
				p.mu.Unlock()
				p.fail(err)
				return
			}
		}
		var out *ack
		if s.typeURL == resourcev3.EndpointType {
			p.pending = &ack{version: version, bytes: size, at: sent}
			if p.ready {
				out = p.pending
			}
		}
		if !p.ready && p.setUp() {
			// Set up: the proxy's first report, at this ACK.
			p.ready = true
			out = &ack{version: p.pending.version, bytes: p.pending.bytes, at: sent}
		}
		p.mu.Unlock()
		if out != nil {
			p.report(out.version, out.bytes, out.at)
		}
	}
}

// closed takes the end of stream s: the proxy's end, unless the proxy
// closed it itself (a subscription it no longer needs).
func (p *contourProxy) closed(s *typeStream, err error) {
	p.mu.Lock()
	mine := p.streams[s.streamKey] == s
	p.mu.Unlock()
	if mine {
		p.fail(fmt.Errorf("%s %q: %w", s.typeURL, s.name, err))
	}
}

// setUp reports whether every stream of the proxy has had a response and
// the proxy holds the endpoints of every cluster: what an Envoy needs to
// serve. p.mu is held.
func (p *contourProxy) setUp() bool {
	eds := 0
	for k, s := range p.streams {
		if !s.acked || (k.typeURL == resourcev3.EndpointType && p.held[k.typeURL][k.name] == nil) {
			return false
		}
		if k.typeURL == resourcev3.EndpointType {
			eds++
		}
	}
	return eds > 0 && p.pending != nil
}

// follow makes a subscription of each endpoint, route configuration and
// secret that the clusters and listeners held name, and ends those of the
// ones they no longer name; and it subscribes to the listeners once the
// clusters are initialised (CDS and each cluster's EDS have had a
// response), as Envoy's initialisation goes and as a real Envoy did against
// Contour: RTDS and CDS, then EDS, then LDS, then RDS. p.mu is held.
func (p *contourProxy) follow(ctx context.Context) error {
	var ms []types.Resource
	for _, typ := range []string{resourcev3.ClusterType, resourcev3.ListenerType} {
		for _, name := range slices.Sorted(maps.Keys(p.held[typ])) {
			m, err := p.held[typ][name].UnmarshalNew()
			if err != nil {
				return fmt.Errorf("decoding %s %s: %w", typ, name, err)
			}
			ms = append(ms, m)
		}
	}
	wanted := map[streamKey]bool{}
	for typ, names := range resource.Subscribed(ms) {
		if typ != resourcev3.EndpointType && typ != resourcev3.RouteType && typ != resourcev3.SecretType {
			continue
		}
		for _, name := range names {
			wanted[streamKey{typ, name}] = true
		}
	}
	for k, s := range p.streams {
		if k.name != "" && k.typeURL != resourcev3.RuntimeType && !wanted[k] {
			delete(p.streams, k)
			delete(p.held[k.typeURL], k.name)
			s.cancel()
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(wanted), func(a, b streamKey) int {
		return strings.Compare(a.typeURL+"/"+a.name, b.typeURL+"/"+b.name)
	}) {
		if p.streams[k] == nil {
			if err := p.open(ctx, k); err != nil {
				return err
			}
		}
	}
	lds := streamKey{resourcev3.ListenerType, ""}
	if p.streams[lds] != nil {
		return nil
	}
	for k, s := range p.streams {
		if (k.typeURL == resourcev3.ClusterType || k.typeURL == resourcev3.EndpointType) && !s.acked {
			return nil
		}
	}
	return p.open(ctx, lds)
}

// resourceName is the name of a resource in a response.
func resourceName(a *anypb.Any) string {
	m, err := a.UnmarshalNew()
	if err != nil {
		return ""
	}
	if n, ok := m.(interface{ GetName() string }); ok {
		return n.GetName()
	}
	if c, ok := m.(interface{ GetClusterName() string }); ok {
		return c.GetClusterName()
	}
	return ""
}
