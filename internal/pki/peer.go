package pki

import (
	"context"
	"errors"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// PeerFleet returns the fleet (a fleet.ID's String) that the verified
// client certificate of the gRPC peer of ctx proves (VerifiedFleet), or ""
// in plaintext (trustDomain ""), where nothing is verified. It is the one
// check of who is on a stream of the xDS server's port: the ADS streams
// (internal/xds/server) and the stats streams (internal/xds/stats) alike.
func PeerFleet(ctx context.Context, trustDomain string) (string, error) {
	if trustDomain == "" {
		return "", nil
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", errors.New("no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "", errors.New("no verified client certificate")
	}
	id, err := VerifiedFleet(info.State.VerifiedChains, trustDomain)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}
