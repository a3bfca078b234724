//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

var tlsConfig = `
apiVersion: example.com/v1
kind: Envoy
metadata:
  name: edge
spec:
  replicas: 1
---
apiVersion: example.com/v1
kind: EnvoyConfig
metadata:
  name: https
spec:
  envoyRef: edge
  tlsSecrets:
  - {name: server-cert, secretRef: web-tls}
  resources:
    listeners:
` + realenvoy.TLSListener("https", 8443, "server-cert") + `        - name: envoy.filters.network.tcp_proxy
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
            stat_prefix: https
            cluster: web
    clusters:
    - name: web
      type: EDS
      connect_timeout: 1s
      eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
`

// inlineKeyConfig is what the migration recipe of docs/tasks/tls.md starts from.
const inlineKeyConfig = `
apiVersion: example.com/v1
kind: EnvoyConfig
metadata:
  name: inline-key
spec:
  envoyRef: edge
  resources:
    secrets:
    - name: server-cert
      tls_certificate:
        certificate_chain: {inline_string: "-----BEGIN CERTIFICATE-----"}
        private_key: {inline_string: "-----BEGIN PRIVATE KEY-----"}
`

// writeCertificate writes a new certificate for cn and its key, in PEM, to
// dir, and returns their paths.
func writeCertificate(t *testing.T, dir, cn string) (crtPath, keyPath string, crt []byte) {
	t.Helper()
	crt, key := xdstest.ServingCertificate(t, cn)
	crtPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(crtPath, crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return crtPath, keyPath, crt
}

// applyTLSSecret creates or replaces the kubernetes.io/tls Secret web-tls
// from files, as a user would with kubectl.
func applyTLSSecret(t *testing.T, ns, crtPath, keyPath string) {
	t.Helper()
	manifest := kubectl.Run(t, "-n", ns, "create", "secret", "tls", "web-tls", "--cert", crtPath, "--key", keyPath,
		"--dry-run=client", "-o", "yaml")
	if out, err := kubectl.Input(manifest, "-n", ns, "apply", "-f", "-"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// A user's TLS Secret, labelled for the control plane and named in
// spec.tlsSecrets, is served to the fleet's proxy over SDS, and a renewed
// certificate reaches it live. A private key written inline in an
// EnvoyConfig is refused by kubectl apply, with the field named.
func TestTLSSecretOverSDS(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "e2e-tls")
	dir := t.TempDir()
	crtPath, keyPath, crt := writeCertificate(t, dir, "web.example.com")
	applyTLSSecret(t, ns, crtPath, keyPath)
	kubectl.Apply(t, ns, tlsConfig)
	// Not labelled yet: published, and told why the secret is not served.
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/https", `{.status.conditions[?(@.type=="Degraded")].reason}`, "SecretUnavailable")
	kubectl.Run(t, "-n", ns, "label", "secret", "web-tls", "kube-envoy-controller.io/xds-secret=tls")
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/https", `{.status.conditions[?(@.type=="Degraded")].status}`, "False")

	proxy := xdstest.Connect(t, dialAsFleet(t, ns, "edge"), ns+"/edge", "e2e-proxy", resourcev3.SecretType, "server-cert")
	// waitCert reads SDS responses until one serves server-cert with want.
	waitCert := func(want []byte) string {
		t.Helper()
		for range 10 {
			resp, err := proxy.Next("")
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range resp.GetResources() {
				s := &tlsv3.Secret{}
				if err := a.UnmarshalTo(s); err != nil {
					t.Fatal(err)
				}
				if s.GetName() == "server-cert" && string(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes()) == string(want) {
					return resp.GetVersionInfo()
				}
			}
			t.Logf("SDS version %s: %d secrets, not yet the expected certificate", resp.GetVersionInfo(), len(resp.GetResources()))
		}
		t.Fatal("no SDS response with the expected certificate in ten responses")
		return ""
	}
	v1 := waitCert(crt)

	// A renewed certificate, applied over the Secret, reaches the proxy.
	crtPath, keyPath, renewed := writeCertificate(t, dir, "web.example.com")
	applyTLSSecret(t, ns, crtPath, keyPath)
	if v2 := waitCert(renewed); v2 == v1 {
		t.Errorf("the renewed certificate came with the old SDS version %s", v1)
	}

	// A key inline is refused at apply, naming the field and pointing to tlsSecrets.
	inline := filepath.Join(dir, "inline.yaml")
	if err := os.WriteFile(inline, []byte(inlineKeyConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl.Out("-n", ns, "apply", "-f", inline)
	if err == nil {
		t.Fatalf("an EnvoyConfig with a private key inline was applied: %s", out)
	}
	for _, want := range []string{`spec.resources.secrets[0] ("server-cert"): tls_certificate.private_key.inline_string`, "spec.tlsSecrets"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
}
