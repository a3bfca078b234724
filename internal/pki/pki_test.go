package pki

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
)

var (
	t0   = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	opts = Options{TrustDomain: "example.org", CAValidity: 90 * 24 * time.Hour, CertValidity: 24 * time.Hour, Propagation: time.Hour}
)

func mustRotate(t *testing.T, a Authority, now time.Time) (Authority, bool) {
	t.Helper()
	next, changed, err := Rotate(a, now, opts)
	if err != nil {
		t.Fatal(err)
	}
	return next, changed
}

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verify checks leaf against the authority's bundle for usage, at now.
func verify(a Authority, leaf Leaf, usage x509.ExtKeyUsage, now time.Time) error {
	b, _ := pem.Decode(leaf.Cert)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err
	}
	_, err = c.Verify(x509.VerifyOptions{Roots: a.Pool(), CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

func TestOptionsCheck(t *testing.T) {
	if err := DefaultOptions.Check(); err != nil {
		t.Errorf("DefaultOptions: %v", err)
	}
	for name, o := range map[string]Options{
		"no trust domain":       {CAValidity: opts.CAValidity, CertValidity: opts.CertValidity},
		"upper case domain":     {TrustDomain: "Example.org", CAValidity: opts.CAValidity, CertValidity: opts.CertValidity},
		"CA shorter than 3x":    {TrustDomain: "a", CAValidity: 2 * time.Hour, CertValidity: time.Hour},
		"certificate too short": {TrustDomain: "a", CAValidity: time.Hour, CertValidity: time.Second},
		"propagation too long":  {TrustDomain: "a", CAValidity: 6 * time.Hour, CertValidity: time.Hour, Propagation: 2 * time.Hour},
	} {
		if err := o.Check(); err == nil {
			t.Errorf("%s: Check() = nil, want an error", name)
		}
	}
}

// The whole life of an authority: the first CA signs at once; a CA in the
// last third of its life gets a successor that is trusted first and signs
// only after the propagation time; the old CA stays trusted, so that what it
// signed keeps verifying, until it expires.
func TestRotation(t *testing.T) {
	a, changed := mustRotate(t, Authority{}, t0)
	if !changed || len(a.CAs) != 1 {
		t.Fatalf("from nothing: changed=%v, %d CAs; want a new CA", changed, len(a.CAs))
	}
	first := a.CAs[0]
	if a.Signer(t0, opts).Cert != first.Cert {
		t.Error("the first CA does not sign at once")
	}
	if _, changed := mustRotate(t, a, t0.Add(59*24*time.Hour)); changed {
		t.Error("a CA with two thirds of its life left was rotated")
	}
	if got := NextRotation(a); !got.Equal(first.Cert.NotAfter.Add(-first.Cert.NotAfter.Sub(first.Cert.NotBefore) / 3)) {
		t.Errorf("NextRotation = %s", got)
	}

	oldLeaf, err := IssueClient(a, fleet.ID{Namespace: "ns", Name: "edge"}, t0, opts)
	if err != nil {
		t.Fatal(err)
	}

	rotateAt := t0.Add(61 * 24 * time.Hour)
	b, changed := mustRotate(t, a, rotateAt)
	if !changed || len(b.CAs) != 2 || b.CAs[1].Cert != first.Cert {
		t.Fatalf("in the last third: changed=%v, %d CAs; want a new CA before the old one", changed, len(b.CAs))
	}
	second := b.CAs[0]
	if b.Signer(rotateAt, opts).Cert != first.Cert {
		t.Error("the new CA signs before its propagation time")
	}
	if at := SignerChangesAt(b, rotateAt, opts); !at.Equal(second.Cert.NotBefore.Add(clockSkew + opts.Propagation)) {
		t.Errorf("SignerChangesAt = %s", at)
	}
	after := rotateAt.Add(opts.Propagation + time.Second)
	if b.Signer(after, opts).Cert != second.Cert {
		t.Error("the new CA does not sign after its propagation time")
	}
	if !SignerChangesAt(b, after, opts).IsZero() {
		t.Error("SignerChangesAt after the change is not zero")
	}
	if _, changed := mustRotate(t, b, after); changed {
		t.Error("a fresh successor was rotated again")
	}
	// Both verify while both are trusted.
	newLeaf, err := IssueClient(b, fleet.ID{Namespace: "ns", Name: "edge"}, after, opts)
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]Leaf{"old": oldLeaf, "new": newLeaf} {
		// The old one verifies only within its own life: check it then.
		at := after
		if name == "old" {
			at = t0.Add(time.Hour)
		}
		if err := verify(b, l, x509.ExtKeyUsageClientAuth, at); err != nil {
			t.Errorf("the %s CA's certificate does not verify against the bundle: %v", name, err)
		}
	}
	// The old CA is dropped once expired.
	c, changed := mustRotate(t, b, first.Cert.NotAfter.Add(time.Second))
	if !changed || len(c.CAs) != 1 || c.CAs[0].Cert != second.Cert {
		t.Errorf("after the old CA expired: changed=%v, %d CAs", changed, len(c.CAs))
	}
}

func TestClientCertificateNamesItsFleet(t *testing.T) {
	a, _ := mustRotate(t, Authority{}, t0)
	leaf, err := IssueClient(a, fleet.ID{Namespace: "team-a", Name: "edge.v1"}, t0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(a, leaf, x509.ExtKeyUsageClientAuth, t0); err != nil {
		t.Fatalf("the client certificate does not verify: %v", err)
	}
	if err := verify(a, leaf, x509.ExtKeyUsageServerAuth, t0); err == nil {
		t.Error("a client certificate verifies as a server's")
	}
	cert := parse(t, leaf.Cert)
	id, err := FleetOf(cert, "example.org")
	if err != nil || id != (fleet.ID{Namespace: "team-a", Name: "edge.v1"}) {
		t.Errorf("FleetOf = %v, %v", id, err)
	}
	if cert.Subject.CommonName != "team-a/edge.v1" {
		t.Errorf("CN = %q, want the fleet's identity", cert.Subject.CommonName)
	}
	if got := cert.URIs[0].String(); got != "spiffe://example.org/ns/team-a/envoy/edge.v1" {
		t.Errorf("URI SAN = %s", got)
	}
	if _, err := FleetOf(cert, "other.org"); err == nil {
		t.Error("FleetOf accepted another trust domain")
	}
	if !cert.NotAfter.Equal(t0.Add(opts.CertValidity).Truncate(time.Second)) {
		t.Errorf("NotAfter = %s", cert.NotAfter)
	}
}

func TestFleetOfRefusesOtherIdentities(t *testing.T) {
	for _, uri := range []string{
		"spiffe://example.org/ns/a/sa/b",
		"spiffe://example.org/ns/a/envoy/b/c",
		"spiffe://example.org/ns/A/envoy/b",
		"spiffe://example.org/ns/a/envoy/b?x=1",
		"https://example.org/ns/a/envoy/b",
		"spiffe://evil.org/ns/a/envoy/b",
	} {
		u := mustURL(t, uri)
		if _, err := FleetOf(&x509.Certificate{URIs: u}, "example.org"); err == nil {
			t.Errorf("FleetOf(%s) = nil error", uri)
		}
	}
	two := append(mustURL(t, "spiffe://example.org/ns/a/envoy/b"), mustURL(t, "spiffe://example.org/ns/c/envoy/d")...)
	if _, err := FleetOf(&x509.Certificate{URIs: two}, "example.org"); err == nil {
		t.Error("FleetOf accepted two identities")
	}
}

func TestServerCertificate(t *testing.T) {
	a, _ := mustRotate(t, Authority{}, t0)
	leaf, err := IssueServer(a, []string{"xds.ops.svc", "localhost", "127.0.0.1"}, t0, opts)
	if err != nil {
		t.Fatal(err)
	}
	cert := parse(t, leaf.Cert)
	for _, host := range []string{"xds.ops.svc", "localhost", "127.0.0.1"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: a.Pool(), CurrentTime: t0}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "other.svc", Roots: a.Pool(), CurrentTime: t0}); err == nil {
		t.Error("the server certificate verifies for a host it does not name")
	}
	if _, err := tls.X509KeyPair(leaf.Cert, leaf.Key); err != nil {
		t.Errorf("the server's certificate and key do not pair: %v", err)
	}
}

// A certificate never outlives the CA that signed it.
func TestCertificateEndsWithItsCA(t *testing.T) {
	a, _ := mustRotate(t, Authority{}, t0)
	late := a.CAs[0].Cert.NotAfter.Add(-time.Hour)
	leaf, err := IssueClient(a, fleet.ID{Namespace: "ns", Name: "edge"}, late, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := parse(t, leaf.Cert).NotAfter; !got.Equal(a.CAs[0].Cert.NotAfter) {
		t.Errorf("NotAfter = %s, want the CA's %s", got, a.CAs[0].Cert.NotAfter)
	}
}

func TestCurrent(t *testing.T) {
	a, _ := mustRotate(t, Authority{}, t0)
	leaf, err := IssueClient(a, fleet.ID{Namespace: "ns", Name: "edge"}, t0, opts)
	if err != nil {
		t.Fatal(err)
	}
	uri := SPIFFEID(opts.TrustDomain, fleet.ID{Namespace: "ns", Name: "edge"}).String()
	ok, renew := Current(leaf, a, uri, t0, opts)
	if !ok || !renew.Equal(parse(t, leaf.Cert).NotAfter.Add(-(opts.CertValidity+clockSkew)/3)) {
		t.Errorf("a fresh certificate: Current = %v, renew at %s", ok, renew)
	}
	other, _ := IssueClient(a, fleet.ID{Namespace: "ns", Name: "other"}, t0, opts)
	rotated, _ := mustRotate(t, a, t0.Add(61*24*time.Hour))
	mixed := Leaf{Cert: leaf.Cert, Key: other.Key}
	for name, c := range map[string]struct {
		leaf Leaf
		a    Authority
		uri  string
		now  time.Time
	}{
		"another fleet's":      {leaf, a, SPIFFEID(opts.TrustDomain, fleet.ID{Namespace: "ns", Name: "other"}).String(), t0},
		"in its last third":    {leaf, a, uri, t0.Add(17 * time.Hour)},
		"expired":              {leaf, a, uri, t0.Add(25 * time.Hour)},
		"key of another":       {mixed, a, uri, t0},
		"garbage":              {Leaf{Cert: []byte("x"), Key: []byte("y")}, a, uri, t0},
		"signed by the old CA": {leaf, rotated, uri, t0.Add(61*24*time.Hour + 2*time.Hour)},
		"no authority":         {leaf, Authority{}, uri, t0},
	} {
		if ok, _ := Current(c.leaf, c.a, c.uri, c.now, opts); ok {
			t.Errorf("%s: Current = true", name)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	a, _ := mustRotate(t, Authority{}, t0)
	a, _ = mustRotate(t, a, t0.Add(61*24*time.Hour))
	certs, keys, err := Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(certs, keys)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(a, b) || len(b.CAs) != 2 {
		t.Fatal("decoded authority differs")
	}
	// The keys came back: the decoded authority can sign.
	if _, err := IssueClient(b, fleet.ID{Namespace: "ns", Name: "edge"}, t0.Add(62*24*time.Hour), opts); err != nil {
		t.Errorf("issuing from the decoded authority: %v", err)
	}
	// Keys swapped: refused.
	_, k2, _ := Encode(Authority{CAs: []CA{a.CAs[1], a.CAs[0]}})
	if _, err := Decode(certs, k2); err == nil || !strings.Contains(err.Error(), "not the certificate of key") {
		t.Errorf("swapped keys: %v", err)
	}
	if _, err := Decode(certs, nil); err == nil {
		t.Error("missing keys: no error")
	}
	if _, err := Decode(append(certs, "junk"...), keys); err == nil {
		t.Error("trailing junk: no error")
	}
}

func mustURL(t *testing.T, s string) []*url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return []*url.URL{u}
}

// A CA written by another tool, its key in SEC 1 (as cert-manager writes
// an ECDSA key by default), decodes and signs.
func TestDecodeOtherKeyEncodings(t *testing.T) {
	a, _ := mustRotate(t, Authority{}, t0)
	der, err := x509.MarshalECPrivateKey(a.CAs[0].Key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(a.Bundle(), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := IssueClient(b, fleet.ID{Namespace: "ns", Name: "edge"}, t0, opts); err != nil {
		t.Errorf("issuing: %v", err)
	}
	if _, err := Decode(a.Bundle(), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})); err == nil {
		t.Error("a public key decoded as a CA key")
	}
}

// A fleet's identity is read only from a certificate that a trusted CA
// signed itself, for client authentication, as the operator issues them:
// one a shared CA made for another use, or signed through an intermediate,
// names no fleet, whatever URI it carries.
func TestVerifiedFleet(t *testing.T) {
	uri := mustURL(t, "spiffe://example.org/ns/team/envoy/edge")
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	ca, intermediate := &x509.Certificate{IsCA: true}, &x509.Certificate{IsCA: true}
	leaf := func(usages ...x509.ExtKeyUsage) *x509.Certificate {
		return &x509.Certificate{URIs: uri, ExtKeyUsage: usages}
	}
	tests := []struct {
		name   string
		chains [][]*x509.Certificate
		want   string
	}{
		{"the CA's own client certificate", [][]*x509.Certificate{{leaf(client...), ca}}, ""},
		{"also a server certificate", [][]*x509.Certificate{{leaf(x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth), ca}}, ""},
		{"one of two chains without an intermediate", [][]*x509.Certificate{{leaf(client...), intermediate, ca}, {leaf(client...), ca}}, ""},
		{"no extended key usage", [][]*x509.Certificate{{leaf(), ca}}, "not for client authentication"},
		{"any extended key usage", [][]*x509.Certificate{{leaf(x509.ExtKeyUsageAny), ca}}, "not for client authentication"},
		{"through an intermediate", [][]*x509.Certificate{{leaf(client...), intermediate, ca}}, "not signed by the xDS CA itself"},
		{"nothing verified", nil, "no verified client certificate"},
	}
	for _, tt := range tests {
		id, err := VerifiedFleet(tt.chains, "example.org")
		switch {
		case tt.want == "" && (err != nil || id != (fleet.ID{Namespace: "team", Name: "edge"})):
			t.Errorf("%s: VerifiedFleet = %v, %v", tt.name, id, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: VerifiedFleet error %v, want %q", tt.name, err, tt.want)
		}
	}
}
