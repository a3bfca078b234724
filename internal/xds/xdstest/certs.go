package xdstest

import (
	"context"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
)

// Authority is where a test finds the xDS CA: the operator's
// authority.Store.
type Authority interface {
	Authority(context.Context) (pki.Authority, error)
}

// DialFleet connects to the xDS server at addr as a proxy of fleet
// namespace/name does: over mutual TLS, with a client certificate for the
// fleet from ca (waiting up to a minute for the leader to make it),
// verifying the server as localhost.
func DialFleet(t testing.TB, addr string, ca Authority, namespace, name string, o pki.Options) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	var a pki.Authority
	var err error
	for deadline := time.Now().Add(DefaultTimeout); ; time.Sleep(100 * time.Millisecond) {
		if a, err = ca.Authority(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no xDS CA: %v", err)
		}
	}
	leaf, err := pki.IssueClient(a, fleet.ID{Namespace: namespace, Name: name}, time.Now(), o)
	if err != nil {
		t.Fatal(err)
	}
	return DialTLS(t, addr, "localhost", leaf.Cert, leaf.Key, a.Bundle())
}

// ServingCertificate returns a new certificate for hosts and its key, in
// PEM, from a CA made for it alone: what a TLS Secret holds.
func ServingCertificate(t testing.TB, hosts ...string) (cert, key []byte) {
	t.Helper()
	a, _, err := pki.Rotate(pki.Authority{}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.IssueServer(a, hosts, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Cert, leaf.Key
}
