package authority_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
)

// clock is a settable time for the Store and the client that checks its
// certificate.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time                  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time)                 { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func (c *clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// serveTLS serves TLS handshakes on a local port with the Store's
// configuration, as the xDS server does for each new connection, and
// returns the address.
func serveTLS(t *testing.T, s *authority.Store) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.ServerConfig(context.Background()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
			}()
		}
	}()
	return l.Addr().String()
}

// The xDS server's own certificate is renewed as it ages: the same one is
// served until two thirds of its life have passed, a new one from the
// current signer from then on. A proxy that connects after the first
// certificate's end, and checks the server at that time, still gets in.
func TestServerCertificateRenewedAsItAges(t *testing.T) {
	ctx := context.Background()
	opts := pki.DefaultOptions
	a := newAuthority(t)
	key := types.NamespacedName{Namespace: operatorNamespace, Name: "aging-server-ca"}
	sec, err := authority.Secret(key, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := suite.Client.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	now := &clock{now: start}
	store := &authority.Store{Reader: suite.Client, Key: key, Options: opts, Hosts: []string{"localhost"}, Now: now.Now}
	addr := serveTLS(t, store)

	// A fleet's proxy: its client certificate, the CA bundle, and the
	// server verified at the clock's time.
	proxy, err := pki.IssueClient(a, fleet.ID{Namespace: "team", Name: "edge"}, start, opts)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(proxy.Cert, proxy.Key)
	if err != nil {
		t.Fatal(err)
	}
	handshake := func() (*x509.Certificate, error) {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{
			ServerName: "localhost", RootCAs: a.Pool(), Certificates: []tls.Certificate{pair},
			MinVersion: tls.VersionTLS13, Time: now.Now,
		})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0], nil
	}

	first, err := handshake()
	if err != nil {
		t.Fatal(err)
	}
	if got := first.NotAfter.Sub(start); got < opts.CertValidity-time.Minute || got > opts.CertValidity {
		t.Fatalf("the server's certificate lives %s from now, want %s", got, opts.CertValidity)
	}
	renewAt := first.NotAfter.Add(-(first.NotAfter.Sub(first.NotBefore)) / 3)

	// Before two thirds of its life: the same certificate.
	now.Set(renewAt.Add(-time.Minute))
	if c, err := handshake(); err != nil || !c.Equal(first) {
		t.Fatalf("%s after it was issued: %v; want the same certificate", now.Since(start), err)
	}

	// Past two thirds: a new one, for a whole lifetime from now.
	now.Set(renewAt.Add(time.Minute))
	renewed, err := handshake()
	if err != nil {
		t.Fatal(err)
	}
	if renewed.Equal(first) {
		t.Fatalf("%s after it was issued, with %s of its life left, the server still serves its first certificate",
			now.Since(start), first.NotAfter.Sub(now.Now()))
	}
	if got := renewed.NotAfter.Sub(now.Now()); got < opts.CertValidity-time.Minute || got > opts.CertValidity {
		t.Errorf("the renewed certificate lives %s from its renewal, want %s", got, opts.CertValidity)
	}

	// After the first certificate's end, a proxy still connects.
	now.Set(first.NotAfter.Add(time.Hour))
	c, err := handshake()
	var invalid x509.CertificateInvalidError
	if errors.As(err, &invalid) {
		t.Fatalf("a proxy connecting %s after the server's first certificate expired is refused: %v", now.Since(first.NotAfter), err)
	}
	if err != nil || !c.Equal(renewed) {
		t.Errorf("after the first certificate's end: %v; want the renewed certificate", err)
	}
}
