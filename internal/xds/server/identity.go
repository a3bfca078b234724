package server

import (
	"context"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/cache"
)

// Who is on a stream. Over mutual TLS, a stream's fleet is the one its
// verified client certificate names (pki.PeerFleet, pki.VerifiedFleet: a certificate the
// xDS CA signed directly, for client authentication): a node that claims
// another fleet is refused with PermissionDenied. In plaintext (a local
// experiment only) nothing is verified. Either way, a stream keeps the node
// of its first request: a request that names another node, or another
// fleet, ends it, so that a stream cannot read one fleet and then another.

// errUnknownStream refuses a request of a stream that did not open.
var errUnknownStream = status.Error(codes.PermissionDenied, "unknown stream")

// certifiedFleet returns the fleet of the verified client certificate of
// the stream that ctx opens, or "" in plaintext (trustDomain ""):
// pki.PeerFleet, the check the stats receiver on the same port makes too.
func certifiedFleet(ctx context.Context, trustDomain string) (string, error) {
	fleet, err := pki.PeerFleet(ctx, trustDomain)
	if err != nil {
		metricRefused.WithLabelValues(refusedIdentity).Inc()
		return "", status.Error(codes.PermissionDenied, err.Error())
	}
	return fleet, nil
}

// admit admits a request's node: the first one the stream sends, which must
// be of the certificate's fleet, and the same node afterwards.
func (s *stream) admit(node *corev3.Node) error {
	if !s.seen {
		if node.GetCluster() == "" {
			metricRefused.WithLabelValues(refusedIdentity).Inc()
			return status.Error(codes.InvalidArgument, "the stream's first request must carry the node, with its fleet as node.cluster")
		}
		if s.certFleet != "" && node.GetCluster() != s.certFleet {
			metricRefused.WithLabelValues(refusedIdentity).Inc()
			return status.Errorf(codes.PermissionDenied, "node.cluster %q is not the fleet of the client certificate, %q", node.GetCluster(), s.certFleet)
		}
		s.node, s.fleet, s.seen = node.GetId(), cache.Fleet(node), true
		return nil
	}
	// A delta request after the first may leave the node out.
	if node != nil && (node.GetId() != s.node || node.GetCluster() != s.fleet) {
		metricRefused.WithLabelValues(refusedIdentity).Inc()
		return status.Errorf(codes.PermissionDenied, "the stream's node changed from %s/%s to %s/%s", s.fleet, s.node, node.GetCluster(), node.GetId())
	}
	return nil
}
