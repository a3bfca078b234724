// Package pki is the xDS control plane's certificate authority, as pure
// functions of the time: it makes and rotates the CA, issues the xDS server's
// serving certificate and each fleet's client certificate, and reads a
// fleet's identity back from a verified certificate (and from a gRPC
// stream's peer, PeerFleet). It uses only the
// standard library's crypto; the controllers store what it returns in
// Secrets and decide when to call it.
//
// Rotation never breaks a connection or a proxy that has not yet seen a
// change. A new CA is first only trusted, for Options.Propagation, while the
// old one still signs: in that time every proxy's Secret gets the bundle with
// both. Only then does the new CA sign, and the old one stays trusted until it
// expires, so that certificates it issued keep working until they are renewed.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Options are the authority's settings.
type Options struct {
	// TrustDomain is the SPIFFE trust domain of fleet identities.
	TrustDomain string
	// CAValidity is a CA's lifetime. A new CA is made when the newest has
	// less than a third of it left.
	CAValidity time.Duration
	// CertValidity is the lifetime of the server's and the fleets'
	// certificates. They are renewed when less than a third of it is left.
	CertValidity time.Duration
	// Propagation is how long a new CA is only trusted before it signs: long
	// enough for the kubelet to bring every proxy the new bundle.
	Propagation time.Duration
}

// DefaultOptions: a CA lives a year; certificates a day, as Istio's
// workload certificates do; a new CA signs an hour after it is trusted.
var DefaultOptions = Options{
	TrustDomain:  "cluster.local",
	CAValidity:   365 * 24 * time.Hour,
	CertValidity: 24 * time.Hour,
	Propagation:  time.Hour,
}

// Check reports options that cannot work.
func (o Options) Check() error {
	var errs []error
	if o.TrustDomain == "" || len(validation.IsDNS1123Subdomain(o.TrustDomain)) > 0 {
		errs = append(errs, fmt.Errorf("trust domain %q: want a DNS name in lower case", o.TrustDomain))
	}
	if o.CertValidity < time.Minute {
		errs = append(errs, fmt.Errorf("certificate validity %s: want at least a minute", o.CertValidity))
	}
	if o.CAValidity < 3*o.CertValidity {
		errs = append(errs, fmt.Errorf("CA validity %s: want at least three certificate lifetimes (%s)", o.CAValidity, 3*o.CertValidity))
	}
	if o.Propagation < 0 || o.Propagation > o.CAValidity/6 {
		errs = append(errs, fmt.Errorf("propagation %s: want between 0 and a sixth of the CA validity", o.Propagation))
	}
	return errors.Join(errs...)
}

// clockSkew backdates every certificate, so that a peer whose clock is a
// little behind accepts it at once.
const clockSkew = time.Minute

// CA is one certificate authority: its certificate and its key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Authority is the CAs that are trusted, newest first. Each still has its
// key, so that the one that signs can change without a write.
type Authority struct {
	CAs []CA
}

// Empty reports whether there is no CA at all.
func (a Authority) Empty() bool { return len(a.CAs) == 0 }

// Signer returns the CA that signs at now: the newest whose propagation time
// has passed, or, when none has, the oldest (the first CA, which nobody
// trusted before it, signs at once).
func (a Authority) Signer(now time.Time, o Options) CA {
	for _, ca := range a.CAs {
		if !now.Before(ca.Cert.NotBefore.Add(clockSkew + o.Propagation)) {
			return ca
		}
	}
	return a.CAs[len(a.CAs)-1]
}

// Bundle is the PEM of every trusted CA certificate, newest first: what
// servers and proxies verify their peers against.
func (a Authority) Bundle() []byte {
	var b bytes.Buffer
	for _, ca := range a.CAs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
	}
	return b.Bytes()
}

// Pool is the trusted CA certificates as a pool.
func (a Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range a.CAs {
		p.AddCert(ca.Cert)
	}
	return p
}

// Rotate returns the authority as it should be at now: expired CAs dropped,
// and a new CA first when there is none or the newest has less than a third
// of its life left. changed says whether it differs from a.
func Rotate(a Authority, now time.Time, o Options) (next Authority, changed bool, err error) {
	for _, ca := range a.CAs {
		if now.Before(ca.Cert.NotAfter) {
			next.CAs = append(next.CAs, ca)
		}
	}
	changed = len(next.CAs) != len(a.CAs)
	if len(next.CAs) == 0 || inLastThird(next.CAs[0].Cert, now) {
		ca, err := NewCA(now, o)
		if err != nil {
			return a, false, err
		}
		next.CAs = append([]CA{ca}, next.CAs...)
		changed = true
	}
	return next, changed, nil
}

// NextRotation is when Rotate will next change a: when the newest CA enters
// the last third of its life, or the oldest expires.
func NextRotation(a Authority) time.Time {
	if a.Empty() {
		return time.Time{}
	}
	next := renewAt(a.CAs[0].Cert)
	for _, ca := range a.CAs {
		if ca.Cert.NotAfter.Before(next) {
			next = ca.Cert.NotAfter
		}
	}
	return next
}

// inLastThird reports whether cert has less than a third of its life left at now.
func inLastThird(cert *x509.Certificate, now time.Time) bool {
	return !now.Before(renewAt(cert))
}

// renewAt is when a third of cert's life is left.
func renewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Add(-life / 3)
}

// NewCA makes a CA valid from now for o.CAValidity.
func NewCA(now time.Time, o Options) (CA, error) {
	key, err := newKey()
	if err != nil {
		return CA{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return CA{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{"kube-envoy-controller"},
			CommonName:   "kube-envoy-controller xDS CA " + now.UTC().Format(time.RFC3339),
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(o.CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          keyID(key.Public()),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return CA{}, fmt.Errorf("creating the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return CA{}, err
	}
	return CA{Cert: cert, Key: key}, nil
}

// SPIFFEID is the identity of fleet id in trustDomain:
// spiffe://<trust domain>/ns/<namespace>/envoy/<name>. FleetOf reads it back.
func SPIFFEID(trustDomain string, id fleet.ID) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/ns/" + id.Namespace + "/envoy/" + id.Name}
}

// VerifiedFleet reads the fleet that a client's verified certificate
// chains (a TLS handshake's) prove. The operator signs a fleet's
// certificate with the xDS CA itself, for client authentication, so the
// certificate must be signed by a trusted CA directly, with no
// intermediate, and carry the clientAuth extended key usage: of the
// certificates that a CA shared with other uses signs (an external CA,
// --xds-ca-rotation=false), those made for something else are refused,
// whatever identity they claim. Its fleet is then FleetOf's.
func VerifiedFleet(chains [][]*x509.Certificate, trustDomain string) (fleet.ID, error) {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return fleet.ID{}, errors.New("no verified client certificate")
	}
	leaf := chains[0][0]
	if !slices.ContainsFunc(chains, func(c []*x509.Certificate) bool { return len(c) == 2 }) {
		return fleet.ID{}, errors.New("the client certificate is not signed by the xDS CA itself: the operator issues fleets' certificates without intermediates")
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return fleet.ID{}, errors.New("the client certificate is not for client authentication (extended key usage clientAuth)")
	}
	return FleetOf(leaf, trustDomain)
}

// FleetOf reads the fleet a client certificate names: its single URI SAN
// must be a fleet identity of trustDomain (SPIFFEID). The certificate must already be
// verified against the authority (see VerifiedFleet).
func FleetOf(cert *x509.Certificate, trustDomain string) (fleet.ID, error) {
	if len(cert.URIs) != 1 {
		return fleet.ID{}, fmt.Errorf("the certificate has %d URI SANs, want one fleet identity", len(cert.URIs))
	}
	u := cert.URIs[0]
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if u.Scheme != "spiffe" || u.Host != trustDomain || len(parts) != 4 || parts[0] != "ns" || parts[2] != "envoy" ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fleet.ID{}, fmt.Errorf("the certificate's identity %q is not a fleet of trust domain %q", u, trustDomain)
	}
	if len(validation.IsDNS1123Label(parts[1])) > 0 || len(validation.IsDNS1123Subdomain(parts[3])) > 0 {
		return fleet.ID{}, fmt.Errorf("the certificate's identity %q names no valid fleet", u)
	}
	return fleet.ID{Namespace: parts[1], Name: parts[3]}, nil
}

// Leaf is an issued certificate and its key, in PEM.
type Leaf struct {
	Cert []byte
	Key  []byte
}

// IssueClient issues the client certificate of fleet id, signed by the
// authority's signer at now. Its subject's common name is id's String.
func IssueClient(a Authority, id fleet.ID, now time.Time, o Options) (Leaf, error) {
	return issue(a.Signer(now, o), now, o, &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"kube-envoy-controller"}, CommonName: id.String()},
		URIs:        []*url.URL{SPIFFEID(o.TrustDomain, id)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// IssueServer issues the xDS server's certificate for hosts (DNS names or
// IP addresses), signed by the authority's signer at now.
func IssueServer(a Authority, hosts []string, now time.Time, o Options) (Leaf, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"kube-envoy-controller"}, CommonName: "kube-envoy-controller xDS server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return issue(a.Signer(now, o), now, o, tmpl)
}

func issue(signer CA, now time.Time, o Options, tmpl *x509.Certificate) (Leaf, error) {
	key, err := newKey()
	if err != nil {
		return Leaf{}, err
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return Leaf{}, err
	}
	tmpl.NotBefore = now.Add(-clockSkew)
	tmpl.NotAfter = now.Add(o.CertValidity)
	if tmpl.NotAfter.After(signer.Cert.NotAfter) {
		// A certificate outliving its CA would fail when the CA does.
		tmpl.NotAfter = signer.Cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.AuthorityKeyId = signer.Cert.SubjectKeyId
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer.Cert, key.Public(), signer.Key)
	if err != nil {
		return Leaf{}, fmt.Errorf("issuing a certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	return Leaf{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// Current reports whether leaf is a certificate the authority would issue
// for the given identity at now: it parses with its key, the current signer
// signed it, its URI SAN is wantURI (for a client certificate; "" for the
// server's), and more than a third of its life is left. If so, renew is when
// that third begins.
func Current(leaf Leaf, a Authority, wantURI string, now time.Time, o Options) (ok bool, renew time.Time) {
	pair, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil || len(pair.Certificate) != 1 || a.Empty() {
		return false, time.Time{}
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false, time.Time{}
	}
	if cert.CheckSignatureFrom(a.Signer(now, o).Cert) != nil || now.Before(cert.NotBefore) || inLastThird(cert, now) {
		return false, time.Time{}
	}
	if wantURI != "" && (len(cert.URIs) != 1 || cert.URIs[0].String() != wantURI) {
		return false, time.Time{}
	}
	return true, renewAt(cert)
}

// SignerChangesAt is when the authority's signer will next change: when the
// newest CA's propagation time ends, or never (zero) if it already signs.
func SignerChangesAt(a Authority, now time.Time, o Options) time.Time {
	if a.Empty() {
		return time.Time{}
	}
	at := a.CAs[0].Cert.NotBefore.Add(clockSkew + o.Propagation)
	if now.Before(at) && a.Signer(now, o).Cert != a.CAs[0].Cert {
		return at
	}
	return time.Time{}
}

// Encode returns the authority as PEM: the certificates (the Bundle) and
// their keys, in the same order.
func Encode(a Authority) (certs, keys []byte, err error) {
	var k bytes.Buffer
	for _, ca := range a.CAs {
		der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
		if err != nil {
			return nil, nil, err
		}
		_ = pem.Encode(&k, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	return a.Bundle(), k.Bytes(), nil
}

// Decode reads an authority that Encode wrote. Each certificate must be a CA
// and match the key at its position.
func Decode(certs, keys []byte) (Authority, error) {
	cs, err := parseBlocks(certs, "CERTIFICATE")
	if err != nil {
		return Authority{}, err
	}
	ks, kinds, err := parseKeys(keys)
	if err != nil {
		return Authority{}, err
	}
	if len(cs) != len(ks) {
		return Authority{}, fmt.Errorf("%d CA certificates but %d keys", len(cs), len(ks))
	}
	var a Authority
	for i := range cs {
		cert, err := x509.ParseCertificate(cs[i])
		if err != nil {
			return Authority{}, fmt.Errorf("CA certificate %d: %w", i, err)
		}
		k, err := parseKey(kinds[i], ks[i])
		if err != nil {
			return Authority{}, fmt.Errorf("CA key %d: %w", i, err)
		}
		key, ok := k.(crypto.Signer)
		if !ok || !cert.IsCA || !publicKeysEqual(cert.PublicKey, key.Public()) {
			return Authority{}, fmt.Errorf("CA certificate %d: not a CA, or not the certificate of key %d", i, i)
		}
		a.CAs = append(a.CAs, CA{Cert: cert, Key: key})
	}
	return a, nil
}

// parseKeys reads PEM private keys: PKCS #8, as Encode writes them, or
// PKCS #1 and SEC 1, as other tools (cert-manager by default) write them.
func parseKeys(data []byte) (keys [][]byte, kinds []string, err error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY":
		default:
			return nil, nil, fmt.Errorf("a PEM block of type %q, want a private key", b.Type)
		}
		keys, kinds = append(keys, b.Bytes), append(kinds, b.Type)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		return nil, nil, errors.New("data after the last private key")
	}
	return keys, kinds, nil
}

func parseKey(kind string, der []byte) (any, error) {
	switch kind {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(der)
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(der)
	}
	return x509.ParsePKCS8PrivateKey(der)
}

func parseBlocks(data []byte, typ string) ([][]byte, error) {
	var out [][]byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != typ {
			return nil, fmt.Errorf("a PEM block of type %q, want %q", b.Type, typ)
		}
		out = append(out, b.Bytes)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		return nil, fmt.Errorf("data after the last %s block", typ)
	}
	return out, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// newKey makes an ECDSA P-256 key: small, fast, and what Envoy and Go both
// support everywhere.
func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func keyID(pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(der)
	return sum[:20]
}

// newSerial returns a random 128-bit serial number.
func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// Equal reports whether two authorities hold the same CAs in the same order.
func Equal(a, b Authority) bool {
	return slices.EqualFunc(a.CAs, b.CAs, func(x, y CA) bool { return x.Cert.Equal(y.Cert) })
}
