package server

import (
	"slices"
	"strings"

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
// (cache.Cache.CreateWatch), and the stream's record (stream) keeps only the
// type's name: a proxy's standing (accepted, rejected, pending) is that of
// the types it is served. Each stream may ask for at most maxUnservedTypes
// of them, since go-control-plane keeps each type a stream names: a stream
// that names more ends (ResourceExhausted). The subscription is counted
// (metricUnserved, once per stream and type) and logged once per stream.
// A REST fetch of any type is refused (errNoFetch).

// servedFields names the types served, e.g. "listeners, routes and secrets".
var servedFields = func() string {
	fields := make([]string, len(resource.Kinds))
	for i, k := range resource.Kinds {
		fields[i] = k.Field
	}
	last := len(fields) - 1
	return strings.Join(fields[:last], ", ") + " and " + fields[last]
}()

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

// askUnserved records that the stream asked for typeURL, a type not
// served, and refuses the request when the stream asked for more of them
// than it may. first is set for the first such type of the stream.
func (s *stream) askUnserved(typeURL string) (first bool, err error) {
	if slices.Contains(s.unserved, typeURL) {
		return false, nil
	}
	if len(s.unserved) == maxUnservedTypes {
		metricRefused.WithLabelValues(refusedType).Inc()
		// The type URL is the client's: keep the message short.
		return false, status.Errorf(codes.ResourceExhausted, "type %q is not served, and the stream asks for more than the %d types not served that one stream may: only %s are served",
			conditions.Truncate(typeURL, 200), maxUnservedTypes, servedFields)
	}
	s.unserved = append(s.unserved, typeURL)
	metricUnserved.WithLabelValues(unservedLabel(typeURL)).Inc()
	return len(s.unserved) == 1, nil
}

// logUnserved logs a stream's first type not served.
func logUnserved(log logr.Logger, a admission, typeURL string) {
	if !a.first {
		return
	}
	log.Info("a proxy asks for a type the xDS server does not serve: it is left unanswered, and the proxy's other subscriptions go on (logged once per stream)",
		"node", conditions.Truncate(a.node, maxNodeID), "fleet", conditions.Truncate(a.fleet, maxNodeID),
		"type", conditions.Truncate(typeURL, 200), "served", servedFields)
}
