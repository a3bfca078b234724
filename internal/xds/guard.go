package xds

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
)

// MaxNACKDetail bounds a NACK's error_detail wherever the operator keeps it:
// the tracker, logs, events, reports and status all get it cut to this.
const MaxNACKDetail = 1024

// guard checks each request before the server's other callbacks and the
// cache see it: a type the server does not serve ends the stream
// (InvalidArgument), and a NACK's error_detail, which the proxy chooses, is
// cut to MaxNACKDetail bytes, so that no copy of it is larger.
type guard struct{ serverv3.Callbacks }

var _ serverv3.Callbacks = guard{}

// OnStreamRequest implements sotw.Callbacks.
func (g guard) OnStreamRequest(id int64, r *discoveryv3.DiscoveryRequest) error {
	if err := servedType(r.GetTypeUrl()); err != nil {
		metricRefused.WithLabelValues(refusedType).Inc()
		return err
	}
	cutDetail(r.GetErrorDetail())
	return g.Callbacks.OnStreamRequest(id, r)
}

// OnStreamDeltaRequest implements delta.Callbacks.
func (g guard) OnStreamDeltaRequest(id int64, r *discoveryv3.DeltaDiscoveryRequest) error {
	if err := servedType(r.GetTypeUrl()); err != nil {
		metricRefused.WithLabelValues(refusedType).Inc()
		return err
	}
	cutDetail(r.GetErrorDetail())
	return g.Callbacks.OnStreamDeltaRequest(id, r)
}

// cutDetail cuts a NACK's message in place, and drops its details (typed
// payloads nothing reads).
func cutDetail(s *statuspb.Status) {
	if s == nil {
		return
	}
	s.Message = conditions.Truncate(s.GetMessage(), MaxNACKDetail)
	s.Details = nil
}
