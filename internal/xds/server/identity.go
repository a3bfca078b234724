package server

import (
	"context"
	"fmt"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
)

// identities knows who is on each stream. Over mutual TLS, a stream's fleet
// is the one its verified client certificate names (pki.VerifiedFleet: a
// certificate the xDS CA signed directly, for client authentication): a node
// that claims another fleet is refused with PermissionDenied. In plaintext
// (a local experiment only) nothing is verified. Either way, a stream keeps
// the node of its first request: a request that names another node, or
// another fleet, ends it, so that a stream cannot read one fleet and then
// another.
type identities struct {
	// trustDomain is the fleets' trust domain; "" in plaintext.
	trustDomain string

	mu      sync.Mutex
	streams map[int64]*streamIdentity
}

type streamIdentity struct {
	// fleet is what the client certificate names, "" in plaintext.
	fleet string
	// id and cluster are the node of the stream's first request.
	id, cluster string
	seen        bool
}

func newIdentities(trustDomain string) *identities {
	return &identities{trustDomain: trustDomain, streams: map[int64]*streamIdentity{}}
}

// open records the stream's peer: over TLS, the fleet of its verified certificate.
func (i *identities) open(ctx context.Context, id int64) error {
	st := &streamIdentity{}
	if i.trustDomain != "" {
		fleet, err := i.fleetOf(ctx)
		if err != nil {
			metricRefused.WithLabelValues(refusedIdentity).Inc()
			return status.Error(codes.PermissionDenied, err.Error())
		}
		st.fleet = fleet
	}
	i.mu.Lock()
	i.streams[id] = st
	i.mu.Unlock()
	return nil
}

func (i *identities) fleetOf(ctx context.Context) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", fmt.Errorf("no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "", fmt.Errorf("no verified client certificate")
	}
	id, err := pki.VerifiedFleet(info.State.VerifiedChains, i.trustDomain)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// check admits a request's node: the first one the stream sends, which must
// be of the certificate's fleet, and the same node afterwards.
func (i *identities) check(id int64, node *corev3.Node) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	st := i.streams[id]
	if st == nil {
		return status.Error(codes.PermissionDenied, "unknown stream")
	}
	if !st.seen {
		if node.GetCluster() == "" {
			metricRefused.WithLabelValues(refusedIdentity).Inc()
			return status.Error(codes.InvalidArgument, "the stream's first request must carry the node, with its fleet as node.cluster")
		}
		if st.fleet != "" && node.GetCluster() != st.fleet {
			metricRefused.WithLabelValues(refusedIdentity).Inc()
			return status.Errorf(codes.PermissionDenied, "node.cluster %q is not the fleet of the client certificate, %q", node.GetCluster(), st.fleet)
		}
		st.id, st.cluster, st.seen = node.GetId(), node.GetCluster(), true
		return nil
	}
	// A delta request after the first may leave the node out.
	if node != nil && (node.GetId() != st.id || node.GetCluster() != st.cluster) {
		metricRefused.WithLabelValues(refusedIdentity).Inc()
		return status.Errorf(codes.PermissionDenied, "the stream's node changed from %s/%s to %s/%s", st.cluster, st.id, node.GetCluster(), node.GetId())
	}
	return nil
}

// node returns the node id and cluster of the stream's first request.
func (i *identities) node(id int64) (string, string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if st := i.streams[id]; st != nil {
		return st.id, st.cluster
	}
	return "", ""
}

func (i *identities) closed(id int64) {
	i.mu.Lock()
	delete(i.streams, id)
	i.mu.Unlock()
}
