package xdstest

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
)

// TestPKI are the PKI options of the tests' xDS CAs (NewAuthority): trust
// domain example.org, a CA valid 30 days, certificates a day.
var TestPKI = pki.Options{TrustDomain: "example.org", CAValidity: 30 * 24 * time.Hour, CertValidity: 24 * time.Hour}

// NewAuthority returns a new xDS CA made with TestPKI.
func NewAuthority(t testing.TB) pki.Authority {
	t.Helper()
	a, _, err := pki.Rotate(pki.Authority{}, time.Now(), TestPKI)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ServerTLSConfig is the xDS port's mutual TLS, as the operator serves it:
// TLS 1.3 and HTTP/2 only, a server certificate for localhost and
// 127.0.0.1 from a (with TestPKI), and a client certificate from a
// required and verified.
func ServerTLSConfig(t testing.TB, a pki.Authority) *tls.Config {
	t.Helper()
	leaf, err := pki.IssueServer(a, []string{"localhost", "127.0.0.1"}, time.Now(), TestPKI)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: a.Pool(), NextProtos: []string{"h2"},
	}
}

// ServerTLS is ServerTLSConfig as the xDS server takes it (server.SetTLS):
// each call returns a copy of the one configuration.
func ServerTLS(t testing.TB, a pki.Authority) func(context.Context) (*tls.Config, error) {
	t.Helper()
	cfg := ServerTLSConfig(t, a)
	return func(context.Context) (*tls.Config, error) { return cfg.Clone(), nil }
}
