package xdstest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// ADS is one proxy's state-of-the-world ADS stream, for every type at once,
// as Envoy holds it: the test subscribes to each type, by name or to all of
// it, and receives, accepts or rejects the responses in the order the
// server sends them. Each request carries the type's names, the version
// last accepted and the nonce last received, as Envoy's do; only the first
// carries the node.
type ADS struct {
	Stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	Node   *corev3.Node
	// Timeout bounds Recv's wait (DefaultTimeout when zero). When it
	// passes, the stream is closed.
	Timeout time.Duration
	types   map[string]*adsType
	sent    bool
	cancel  context.CancelFunc
}

// adsType is what the stream knows of one type.
type adsType struct {
	names           []string
	accepted, nonce string
}

// OpenADS opens a state-of-the-world stream as proxy id of fleet. It sends
// nothing until the test subscribes; the stream ends with the test.
func OpenADS(t testing.TB, c discoveryv3.AggregatedDiscoveryServiceClient, fleet, id string) *ADS {
	t.Helper()
	st, cancel := open(t, c.StreamAggregatedResources)
	return &ADS{Stream: st, Node: &corev3.Node{Id: id, Cluster: fleet}, types: map[string]*adsType{}, cancel: cancel}
}

func (a *ADS) typ(typeURL string) *adsType {
	if a.types[typeURL] == nil {
		a.types[typeURL] = &adsType{}
	}
	return a.types[typeURL]
}

// Subscribe asks for the resources of typeURL named names, from now on
// (all of them when names is empty and the type was never subscribed to by
// name: the protocol's legacy wildcard; "*" asks for all of them explicitly).
func (a *ADS) Subscribe(typeURL string, names ...string) error {
	ty := a.typ(typeURL)
	ty.names = names
	return a.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names, VersionInfo: ty.accepted, ResponseNonce: ty.nonce})
}

func (a *ADS) send(req *discoveryv3.DiscoveryRequest) error {
	if !a.sent {
		req.Node, a.sent = a.Node, true
	}
	return a.Stream.Send(req)
}

// Recv returns the next response, of whatever type. It fails, closing the
// stream, when none comes within the stream's Timeout.
func (a *ADS) Recv() (*discoveryv3.DiscoveryResponse, error) {
	resp, err := recvWithin(a.Node.GetId(), a.Timeout, a.cancel, a.Stream.Recv)
	if err != nil {
		return nil, err
	}
	a.typ(resp.GetTypeUrl()).nonce = resp.GetNonce()
	return resp, nil
}

// Ack accepts resp: its version becomes the type's.
func (a *ADS) Ack(resp *discoveryv3.DiscoveryResponse) error {
	ty := a.typ(resp.GetTypeUrl())
	ty.accepted = resp.GetVersionInfo()
	return a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResourceNames: ty.names,
		VersionInfo: ty.accepted, ResponseNonce: resp.GetNonce()})
}

// Nack rejects resp with detail: as Envoy does, the request repeats the
// version last accepted.
func (a *ADS) Nack(resp *discoveryv3.DiscoveryResponse, detail string) error {
	ty := a.typ(resp.GetTypeUrl())
	return a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResourceNames: ty.names,
		VersionInfo: ty.accepted, ResponseNonce: resp.GetNonce(), ErrorDetail: &statuspb.Status{Code: 3, Message: detail}})
}

// Delta is one proxy's delta (incremental) ADS stream, for every type at once.
type Delta struct {
	Stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	Node   *corev3.Node
	// Timeout bounds Recv's wait (DefaultTimeout when zero). When it
	// passes, the stream is closed.
	Timeout time.Duration
	sent    bool
	cancel  context.CancelFunc
}

// OpenDelta opens a delta stream as proxy id of fleet. It sends nothing
// until the test subscribes; the stream ends with the test.
func OpenDelta(t testing.TB, c discoveryv3.AggregatedDiscoveryServiceClient, fleet, id string) *Delta {
	t.Helper()
	st, cancel := open(t, c.DeltaAggregatedResources)
	return &Delta{Stream: st, Node: &corev3.Node{Id: id, Cluster: fleet}, cancel: cancel}
}

// Send sends req, with the node if it is the stream's first request.
func (d *Delta) Send(req *discoveryv3.DeltaDiscoveryRequest) error {
	if !d.sent {
		req.Node, d.sent = d.Node, true
	}
	return d.Stream.Send(req)
}

// Subscribe adds names to the stream's subscriptions to typeURL (a
// wildcard, when the type's first request names none).
func (d *Delta) Subscribe(typeURL string, names ...string) error {
	return d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names})
}

// Unsubscribe removes names from the stream's subscriptions to typeURL.
func (d *Delta) Unsubscribe(typeURL string, names ...string) error {
	return d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesUnsubscribe: names})
}

// Recv returns the next response, of whatever type. It fails, closing the
// stream, when none comes within the stream's Timeout.
func (d *Delta) Recv() (*discoveryv3.DeltaDiscoveryResponse, error) {
	return recvWithin(d.Node.GetId(), d.Timeout, d.cancel, d.Stream.Recv)
}

// Ack accepts resp.
func (d *Delta) Ack(resp *discoveryv3.DeltaDiscoveryResponse) error {
	return d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
}

// Nack rejects resp with detail.
func (d *Delta) Nack(resp *discoveryv3.DeltaDiscoveryResponse, detail string) error {
	return d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce(),
		ErrorDetail: &statuspb.Status{Code: 3, Message: detail}})
}

// open opens a stream with start, for the test's duration; cancel ends it.
func open[S any](t testing.TB, start func(context.Context, ...grpc.CallOption) (S, error)) (S, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st, cancel
}

// recvWithin calls recv, the stream's of proxy id, and gives up after
// timeout (DefaultTimeout when zero), cancelling the stream so that recv
// returns. A stream's own error is returned as it is.
func recvWithin[T any](id string, timeout time.Duration, cancel context.CancelFunc, recv func() (T, error)) (T, error) {
	type received struct {
		v   T
		err error
	}
	ch := make(chan received, 1)
	go func() {
		v, err := recv()
		ch <- received{v, err}
	}()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-timer.C:
		cancel()
		<-ch // the receive ends with the stream
		var zero T
		return zero, fmt.Errorf("proxy %s: no response within %s", id, timeout)
	}
}

// Names returns the names of resources (Anys of clusters, listeners, route
// configurations, secrets, or load assignments: their cluster names), sorted.
func Names(resources []*anypb.Any) ([]string, error) {
	names := make([]string, 0, len(resources))
	for _, a := range resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			return nil, err
		}
		names = append(names, cachev3.GetResourceName(m))
	}
	sort.Strings(names)
	return names, nil
}

// DeltaNames returns the names of a delta response's resources, sorted.
func DeltaNames(resp *discoveryv3.DeltaDiscoveryResponse) []string {
	names := make([]string, 0, len(resp.GetResources()))
	for _, r := range resp.GetResources() {
		names = append(names, r.GetName())
	}
	sort.Strings(names)
	return names
}
