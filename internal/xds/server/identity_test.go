package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"

	fleetid "github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// sharedCA signs as an issuer shared with other uses does (an external CA,
// --xds-ca-rotation=false): certificates of any usage, and intermediates.
type sharedCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// sign issues a certificate for the fleet identity uri from ca, with the
// extended key usages given (none: no such extension), or an intermediate
// CA when uri is "".
func (ca sharedCA) sign(t *testing.T, uri string, usages ...x509.ExtKeyUsage) (sharedCA, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "shared " + uri},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
	}
	if uri == "" {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature
	} else {
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	parent, signer := tmpl, key
	if ca.cert != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return sharedCA{cert, key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// With a CA shared with other uses, a certificate that carries a fleet's
// identity gets that fleet's configuration only if the CA signed it
// itself, for client authentication, as the operator issues fleets'
// certificates: one without the clientAuth usage, or signed by an
// intermediate of the CA, is refused with PermissionDenied, over real TLS.
func TestMTLSRefusesCertificatesNotIssuedForFleets(t *testing.T) {
	root, _, _ := sharedCA{}.sign(t, "")
	a := pki.Authority{CAs: []pki.CA{{Cert: root.cert, Key: root.key}}}
	s, addr := startTLSServer(t, a)
	mustPublish(t, s, "v1", clusters("a"))
	identity := pki.SPIFFEID(testPKI.TrustDomain, fleetid.ID{Namespace: "ns", Name: "edge"}).String()
	bundle := a.Bundle()

	refused := refusals(t, refusedIdentity)
	_, noUsageCert, noUsageKey := root.sign(t, identity)
	intermediate, intermediatePEM, _ := root.sign(t, "")
	_, viaCert, viaKey := intermediate.sign(t, identity, x509.ExtKeyUsageClientAuth)
	for name, c := range map[string]struct{ cert, key []byte }{
		"no extended key usage":   {noUsageCert, noUsageKey},
		"through an intermediate": {append(viaCert, intermediatePEM...), viaKey},
	} {
		// The stream is refused as it opens: the first request may or may
		// not be sent before the refusal arrives.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		st, err := xdstest.DialTLS(t, addr, "localhost", c.cert, c.key, bundle).StreamAggregatedResources(ctx)
		if err == nil {
			_ = st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "pod-1", Cluster: fleet}, TypeUrl: resourcev3.ClusterType})
			var resp *discoveryv3.DiscoveryResponse
			if resp, err = st.Recv(); resp != nil {
				t.Errorf("%s: served %v", name, resp.GetResources())
			}
		}
		cancel()
		wantCode(t, name, err, codes.PermissionDenied)
	}
	if got := refusals(t, refusedIdentity) - refused; got != 2 {
		t.Errorf("%v identity refusals counted, want 2", got)
	}

	// The certificate the operator issues from that CA is served.
	p := shortProxy(xdstest.Connect(t, dialAs(t, addr, a, "ns", "edge"), fleet, "pod-2", resourcev3.ClusterType))
	if _, names, err := p.NextNames(""); err != nil || len(names) != 1 {
		t.Errorf("the operator's certificate for the fleet: %v, %v", names, err)
	}
}
