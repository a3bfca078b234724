package server

import (
	"context"
	"iter"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/go-logr/logr"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/cache"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// guard checks each stream and request before the cache sees it, and has
// the Tracker, behind it, record them: a stream whose peer or node is not
// who it must be ends (identity.go); a request for a type the server does
// not serve is let through to the cache, which leaves it unanswered, and
// the stream goes on (unserved.go), unless it asks for more such types than
// a stream may (ResourceExhausted); a request that names more resources
// than a stream may subscribe to ends the stream (ResourceExhausted) before
// go-control-plane keeps them; and a NACK's error_detail, which the proxy
// chooses, is cut to MaxNACKDetail bytes, so that no copy of it is larger.
// The cache checks what a delta stream's requests add up to. The stream's
// record (stream) is checked and written in one step, under its fleet's
// lock once it asked for a type served.
type guard struct {
	*Tracker
	// trustDomain is the fleets' trust domain; "" in plaintext.
	trustDomain string
	names       cache.NameLimits
	log         logr.Logger
}

var _ serverv3.Callbacks = guard{}

// deltaStream is the id by which the guard and the Tracker know delta
// stream id: go-control-plane numbers state-of-the-world and delta streams
// each from 1, so that both have a stream 1. Delta streams are known by
// negative ids.
func deltaStream(id int64) int64 { return -id }

// OnStreamOpen implements sotw.Callbacks.
func (g guard) OnStreamOpen(ctx context.Context, id int64, _ string) error {
	return g.open(ctx, id)
}

// OnDeltaStreamOpen implements delta.Callbacks.
func (g guard) OnDeltaStreamOpen(ctx context.Context, id int64, _ string) error {
	return g.open(ctx, deltaStream(id))
}

// open makes the record of a stream whose peer is who a stream must be.
func (g guard) open(ctx context.Context, id int64) error {
	fleet, err := certifiedFleet(ctx, g.trustDomain)
	if err != nil {
		return err
	}
	g.Tracker.open(id, fleet)
	return nil
}

// OnDeltaStreamClosed implements delta.Callbacks.
func (g guard) OnDeltaStreamClosed(id int64, _ *corev3.Node) {
	g.Tracker.closed(deltaStream(id))
}

// OnStreamRequest implements sotw.Callbacks.
func (g guard) OnStreamRequest(id int64, r *discoveryv3.DiscoveryRequest) error {
	if err := g.checkNames(r.GetTypeUrl(), len(r.GetResourceNames()), slices.Values(r.GetResourceNames())); err != nil {
		return err
	}
	cutDetail(r.GetErrorDetail())
	a, err := g.Tracker.sotwRequest(id, r)
	logUnserved(g.log, a, r.GetTypeUrl())
	if err != nil {
		return err
	}
	// What follows a NACK: a state-of-the-world NACK carries the last
	// version the proxy accepted, and the cache answers a request whose
	// version differs from the served one at once (answer.go): it would
	// send the rejected version straight back, and the proxy would reject
	// it again, in a loop. So the tracker sees the request as the proxy
	// sent it, and the cache a NACK at the version it rejected: the
	// proxy's next response is the next version. Only an answer to the
	// stream's last response of the type counts (an older nonce is stale,
	// and go-control-plane ignores it). Delta streams need no such rule:
	// their NACKs do not ask for anything again.
	if a.answers && r.GetErrorDetail() != nil {
		r.VersionInfo = a.answered
	}
	return nil
}

// OnStreamDeltaRequest implements delta.Callbacks.
func (g guard) OnStreamDeltaRequest(id int64, r *discoveryv3.DeltaDiscoveryRequest) error {
	sub, unsub, initial := r.GetResourceNamesSubscribe(), r.GetResourceNamesUnsubscribe(), r.GetInitialResourceVersions()
	names := func(yield func(string) bool) {
		for _, list := range [][]string{sub, unsub} {
			for _, n := range list {
				if !yield(n) {
					return
				}
			}
		}
		for n := range initial {
			if !yield(n) {
				return
			}
		}
	}
	if err := g.checkNames(r.GetTypeUrl(), len(sub)+len(unsub)+len(initial), names); err != nil {
		return err
	}
	cutDetail(r.GetErrorDetail())
	a, err := g.Tracker.deltaRequest(deltaStream(id), r)
	logUnserved(g.log, a, r.GetTypeUrl())
	return err
}

// checkNames refuses a request that names more than a stream may
// subscribe to, or an empty name.
func (g guard) checkNames(typeURL string, n int, names iter.Seq[string]) error {
	err := g.names.Check(typeURL, n, names)
	if status.Code(err) == codes.ResourceExhausted {
		metricRefused.WithLabelValues(refusedNames).Inc()
	}
	return err
}

// OnStreamDeltaResponse implements delta.Callbacks.
func (g guard) OnStreamDeltaResponse(id int64, req *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
	g.Tracker.OnStreamDeltaResponse(deltaStream(id), req, resp)
}

// cutDetail cuts a NACK's message in place, and drops its details (typed
// payloads nothing reads).
func cutDetail(s *statuspb.Status) {
	if s == nil {
		return
	}
	s.Message = conditions.Truncate(s.GetMessage(), resource.MaxNACKDetail)
	s.Details = nil
}
