package server

import (
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// A request for a type the server does not serve (extension config
// discovery, scoped routes, virtual hosts, runtime, ...) is left
// unanswered, over either protocol, and the stream goes on: the proxy's
// other subscriptions are served as before. Unanswered, not answered empty:
//
//   - Envoy gives up on a subscription that gets no answer after its config
//     source's initial_fetch_timeout (15 seconds unless set), and what waited
//     for it (a listener whose filter it configures) goes on without it;
//   - a state-of-the-world response without a resource changes nothing for
//     a subscription by name, and Envoy's extension config discovery would
//     reject one that reached it;
//   - a delta response that removes the names ends Envoy's initial fetch
//     timer, and extension config discovery does not count a removal as its
//     first answer: the listener would wait forever.
//
// So the server keeps no watch of such a type and never sends it anything
// (fleetCache.CreateWatch); the tracker does not see its requests either,
// so that a proxy's standing (accepted, rejected, pending) is that of the
// types it is served. Each stream may ask for at most maxUnservedTypes of
// them, since go-control-plane keeps each type a stream names: a stream
// that names more ends (ResourceExhausted). The subscription is counted
// (metricUnserved, once per stream and type) and logged once per stream.
// A REST fetch of any type is refused (errNoFetch).
type unserved struct {
	log logr.Logger

	mu      sync.Mutex
	streams map[int64]*unservedStream
}

// unservedStream is what the guard knows of one stream's unserved types.
type unservedStream struct {
	// types are the unserved types the stream asked for.
	types map[string]bool
	// node is the node of a delta stream's first request, when that was of
	// an unserved type: the callbacks behind the guard have not seen it, and
	// the stream's next request passed on to them carries it in its place.
	node *corev3.Node
	// passed is set once a request of the stream was passed on.
	passed bool
}

// maxUnservedTypes is how many types the server does not serve one stream
// may ask for. Envoy asks for at most a few: extension configs, scoped
// routes, virtual hosts, runtime, LEDS.
const maxUnservedTypes = 8

// unservedTypes labels metricUnserved by the types Envoy may ask for over
// ADS that the server does not serve; any other is "other", so that what a
// client names makes no series.
var unservedTypes = map[string]string{
	"type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig":      "extension_config",
	"type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration": "scoped_route",
	"type.googleapis.com/envoy.config.route.v3.VirtualHost":              "virtual_host",
	"type.googleapis.com/envoy.service.runtime.v3.Runtime":               "runtime",
	"type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint":            "lb_endpoint",
}

// unservedLabel is the label of typeURL in metricUnserved.
func unservedLabel(typeURL string) string {
	if l, ok := unservedTypes[typeURL]; ok {
		return l
	}
	return "other"
}

func newUnserved(log logr.Logger) *unserved {
	return &unserved{log: log, streams: map[int64]*unservedStream{}}
}

func (u *unserved) open(id int64) {
	u.mu.Lock()
	u.streams[id] = &unservedStream{}
	u.mu.Unlock()
}

func (u *unserved) closed(id int64) {
	u.mu.Lock()
	delete(u.streams, id)
	u.mu.Unlock()
}

// served reports whether typeURL is served. When it is not, it records
// that the stream, whose request carries node (nil but in a delta stream's
// first request), asked for it, and refuses the request when the stream
// asked for more unserved types than it may. who is the stream's node id
// and fleet, for the log.
func (u *unserved) served(id int64, node *corev3.Node, typeURL string, who func() (string, string)) (bool, error) {
	if resource.KindOf(typeURL).TypeURL != "" {
		return true, nil
	}
	u.mu.Lock()
	st := u.streams[id]
	if st == nil {
		u.mu.Unlock()
		return false, status.Error(codes.PermissionDenied, "unknown stream")
	}
	if !st.passed && st.node == nil && node != nil {
		st.node = node
	}
	if st.types[typeURL] {
		u.mu.Unlock()
		return false, nil
	}
	if len(st.types) == maxUnservedTypes {
		u.mu.Unlock()
		metricRefused.WithLabelValues(refusedType).Inc()
		// The type URL is the client's: keep the message short.
		return false, status.Errorf(codes.ResourceExhausted, "type %q is not served, and the stream asks for more than the %d types not served that one stream may: only %s are served",
			conditions.Truncate(typeURL, 200), maxUnservedTypes, servedFields)
	}
	if st.types == nil {
		st.types = map[string]bool{}
	}
	st.types[typeURL] = true
	first := len(st.types) == 1
	u.mu.Unlock()
	metricUnserved.WithLabelValues(unservedLabel(typeURL)).Inc()
	if first {
		nodeID, cluster := who()
		u.log.Info("a proxy asks for a type the xDS server does not serve: it is left unanswered, and the proxy's other subscriptions go on (logged once per stream)",
			"node", conditions.Truncate(nodeID, maxNodeID), "fleet", conditions.Truncate(cluster, maxNodeID),
			"type", conditions.Truncate(typeURL, 200), "served", servedFields)
	}
	return false, nil
}

// passOn returns the node a request passed on to the callbacks behind the
// guard carries: its own, or, for the first one of a delta stream whose
// first request was of an unserved type, that request's.
func (u *unserved) passOn(id int64, node *corev3.Node) *corev3.Node {
	u.mu.Lock()
	defer u.mu.Unlock()
	st := u.streams[id]
	if st == nil || st.passed {
		return node
	}
	st.passed = true
	if node == nil {
		node = st.node
	}
	st.node = nil
	return node
}
