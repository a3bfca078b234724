package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// A stream's fleet is its peer's verified client certificate's; nothing is
// read in plaintext, and a peer without a verified certificate is none.
func TestPeerFleet(t *testing.T) {
	leaf := &x509.Certificate{URIs: mustURL(t, "spiffe://example.org/ns/team/envoy/edge"), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	verified := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{
		State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf, {IsCA: true}}}}}})
	if got, err := PeerFleet(verified, "example.org"); err != nil || got != "team/edge" {
		t.Errorf("PeerFleet of a verified client = %q, %v; want team/edge", got, err)
	}
	if got, err := PeerFleet(verified, ""); err != nil || got != "" {
		t.Errorf("PeerFleet in plaintext = %q, %v; want nothing", got, err)
	}
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"no peer", context.Background(), "no peer"},
		{"no TLS", peer.NewContext(context.Background(), &peer.Peer{}), "no verified client certificate"},
		{"nothing verified", peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{}}), "no verified client certificate"},
		{"another trust domain", verified, "example.org"},
	} {
		td := "example.org"
		if tt.name == "another trust domain" {
			td = "other.example"
		}
		if got, err := PeerFleet(tt.ctx, td); err == nil || got != "" || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: PeerFleet = %q, %v; want an error with %q", tt.name, got, err, tt.want)
		}
	}
}
