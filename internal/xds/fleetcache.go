package xds

import (
	"context"
	"sync"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
)

// fleetCache is the snapshot cache as the ADS streams see it. go-control-plane's
// cache keeps an entry, with its watches, for any node that asks, and answers
// some requests by sending on the stream's channel while it holds the lock that
// every publication takes. fleetCache makes sure that:
//
//   - only the types the server serves reach the cache. A stream then has at
//     most one response of each of them in flight, and its channel (go-control-
//     plane sizes it for every type it knows) always has room: the cache never
//     waits for a stream while it holds its lock;
//   - only published fleets have an entry in the cache. A watch of a fleet that
//     is not published waits here, with its stream, and is handed to the cache
//     when the fleet is published; a cleared fleet's watches wait here again.
//     A proxy may connect before its fleet is published (a new fleet, or a
//     replica that has just started) and is served as soon as it is;
//   - no stream subscribes to every secret of a fleet.
type fleetCache struct {
	cachev3.SnapshotCache

	// mu is held while the cache is called, so that a watch is either
	// waiting here or in the cache, never lost between the two.
	mu        sync.Mutex
	published map[string]bool
	// watches holds every open watch by fleet, waiting or in the cache.
	// Streams cancel their watches when they end, so this holds only the
	// watches of open streams, whatever fleet they claim.
	watches map[string]map[*heldWatch]struct{}
}

// heldWatch is an open watch of a stream.
type heldWatch struct {
	// create hands the watch to the cache and returns the cache's cancel.
	create func() (func(), error)
	// cancel is the cache's, once the cache has the watch.
	cancel  func()
	inCache bool
}

func newFleetCache(c cachev3.SnapshotCache) *fleetCache {
	return &fleetCache{SnapshotCache: c, published: map[string]bool{}, watches: map[string]map[*heldWatch]struct{}{}}
}

// servedType refuses a type URL the server does not serve.
func servedType(typeURL string) error {
	if KindOf(typeURL).TypeURL == "" {
		// The type URL is the client's: keep the message short.
		return status.Errorf(codes.InvalidArgument, "type %q is not served: only listeners, routes, clusters, endpoints and secrets are",
			conditions.Truncate(typeURL, 200))
	}
	return nil
}

// errWildcardSecrets refuses a subscription to every secret of a fleet: a
// proxy asks for the secrets its listeners and clusters name.
var errWildcardSecrets = status.Error(codes.InvalidArgument, "secrets are served by name only, not to a wildcard subscription")

// CreateWatch implements cachev3.ConfigWatcher, for state of the world streams.
func (c *fleetCache) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, ch chan cachev3.Response) (func(), error) {
	if err := servedType(req.GetTypeUrl()); err != nil {
		metricRefused.WithLabelValues(refusedType).Inc()
		return nil, err
	}
	if req.GetTypeUrl() == resourcev3.SecretType {
		if sub.IsWildcard() {
			metricRefused.WithLabelValues(refusedWildcardSecret).Inc()
			return nil, errWildcardSecrets
		}
		if len(req.GetResourceNames()) == 0 {
			// No names after named ones unsubscribes from every secret, but
			// the cache would answer an unnamed request with all of them.
			// Nothing is subscribed: nothing is sent.
			return func() {}, nil
		}
	}
	return c.hold(FleetID(req.GetNode()), func() (func(), error) { return c.SnapshotCache.CreateWatch(req, sub, ch) })
}

// CreateDeltaWatch implements cachev3.ConfigWatcher, for delta streams.
func (c *fleetCache) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, ch chan cachev3.DeltaResponse) (func(), error) {
	if err := servedType(req.GetTypeUrl()); err != nil {
		metricRefused.WithLabelValues(refusedType).Inc()
		return nil, err
	}
	if req.GetTypeUrl() == resourcev3.SecretType && sub.IsWildcard() {
		metricRefused.WithLabelValues(refusedWildcardSecret).Inc()
		return nil, errWildcardSecrets
	}
	return c.hold(FleetID(req.GetNode()), func() (func(), error) { return c.SnapshotCache.CreateDeltaWatch(req, sub, ch) })
}

// hold keeps a stream's watch, in the cache if its fleet is published.
func (c *fleetCache) hold(fleet string, create func() (func(), error)) (func(), error) {
	w := &heldWatch{create: create}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.published[fleet] {
		cancel, err := create()
		if err != nil {
			return nil, err
		}
		w.cancel, w.inCache = cancel, true
	}
	if c.watches[fleet] == nil {
		c.watches[fleet] = map[*heldWatch]struct{}{}
	}
	c.watches[fleet][w] = struct{}{}
	return func() { c.release(fleet, w) }, nil
}

// release forgets a watch the stream cancelled (it may do so more than once).
func (c *fleetCache) release(fleet string, w *heldWatch) {
	c.mu.Lock()
	delete(c.watches[fleet], w)
	if len(c.watches[fleet]) == 0 {
		delete(c.watches, fleet)
	}
	cancel := w.cancel
	w.cancel, w.inCache = nil, false
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// SetSnapshot publishes a fleet's snapshot; the first one hands the fleet's
// waiting watches to the cache.
func (c *fleetCache) SetSnapshot(ctx context.Context, fleet string, snap cachev3.ResourceSnapshot) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.SnapshotCache.SetSnapshot(ctx, fleet, snap); err != nil {
		return err
	}
	if c.published[fleet] {
		return nil
	}
	c.published[fleet] = true
	for w := range c.watches[fleet] {
		if w.inCache {
			continue
		}
		// The snapshot cache fails a watch only when it cannot send, which
		// the channel's room rules out; a failed watch keeps waiting.
		if cancel, err := w.create(); err == nil {
			w.cancel, w.inCache = cancel, true
		}
	}
	return nil
}

// ClearSnapshot removes a fleet from the cache. The cache drops its watches;
// their streams stay open, and their watches wait here for the fleet again.
func (c *fleetCache) ClearSnapshot(fleet string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.SnapshotCache.ClearSnapshot(fleet)
	delete(c.published, fleet)
	for w := range c.watches[fleet] {
		w.cancel, w.inCache = nil, false
	}
}

// ping takes the locks every publication takes, and returns once it has
// them: it does not return while a publication is stuck.
func (c *fleetCache) ping() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.SnapshotCache.GetSnapshot("")
}

// waiting returns how many watches wait for a fleet to be published.
func (c *fleetCache) waiting(fleet string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for w := range c.watches[fleet] {
		if !w.inCache {
			n++
		}
	}
	return n
}
