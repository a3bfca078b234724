package translate

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

const (
	testCert = "-----BEGIN CERTIFICATE-----\nY2VydC1vbmU=\n-----END CERTIFICATE-----\n"
	// testKey's body is what no message may ever show.
	testKey = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n"
)

func tlsSecretObject(name, label string, typ corev1.SecretType, crt, key string) corev1.Secret {
	s := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Type:       typ,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte(crt), corev1.TLSPrivateKeyKey: []byte(key)},
	}
	if label != "" {
		s.Labels = map[string]string{names.XDSSecretLabel: label}
	}
	return s
}

// A Secret is served only when it is a kubernetes.io/tls Secret labelled
// for SDS with a PEM certificate and key; otherwise the error says why,
// and never shows the Secret's data.
func TestServedSecret(t *testing.T) {
	ecKey := strings.ReplaceAll(testKey, "PRIVATE KEY", "EC PRIVATE KEY")
	tests := []struct {
		name   string
		secret *corev1.Secret
		want   string // part of the error; "" when served
	}{
		{"served", ptrTo(tlsSecretObject("web", names.XDSSecretTLS, corev1.SecretTypeTLS, testCert, testKey)), ""},
		{"an EC key", ptrTo(tlsSecretObject("web", names.XDSSecretTLS, corev1.SecretTypeTLS, testCert, ecKey)), ""},
		{"a chain after other PEM blocks", ptrTo(tlsSecretObject("web", names.XDSSecretTLS, corev1.SecretTypeTLS,
			"-----BEGIN X509 CRL-----\nY3Js\n-----END X509 CRL-----\n"+testCert, testKey)), ""},
		{"missing or unlabelled", nil, "does not exist, or is not labelled kube-envoy-controller.io/xds-secret: tls"},
		{"a fleet's client certificate", ptrTo(tlsSecretObject("c", names.XDSSecretClient, corev1.SecretTypeTLS, testCert, testKey)),
			`labelled kube-envoy-controller.io/xds-secret: "client-certificate"; only "tls" is served`},
		{"the xDS CA", ptrTo(tlsSecretObject("ca", names.XDSSecretCA, corev1.SecretTypeTLS, testCert, testKey)), `"ca"; only "tls"`},
		{"an Opaque Secret", ptrTo(tlsSecretObject("o", names.XDSSecretTLS, corev1.SecretTypeOpaque, testCert, testKey)),
			`is of type "Opaque", not kubernetes.io/tls`},
		{"no certificate", ptrTo(tlsSecretObject("n", names.XDSSecretTLS, corev1.SecretTypeTLS, "", testKey)), "no PEM certificate in tls.crt"},
		{"a key in tls.crt", ptrTo(tlsSecretObject("n", names.XDSSecretTLS, corev1.SecretTypeTLS, testKey, testKey)), "no PEM certificate in tls.crt"},
		{"no key", ptrTo(tlsSecretObject("n", names.XDSSecretTLS, corev1.SecretTypeTLS, testCert, "c2VjcmV0LWtleS1ieXRlcw==")),
			"no unencrypted PEM private key in tls.key"},
		{"an encrypted key", ptrTo(tlsSecretObject("n", names.XDSSecretTLS, corev1.SecretTypeTLS, testCert,
			strings.ReplaceAll(testKey, "PRIVATE KEY", "ENCRYPTED PRIVATE KEY"))), "no unencrypted PEM private key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := servedSecret("server-cert", tt.secret)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("not served: %v", err)
				}
				want := tt.secret.Data
				tc := got.GetTlsCertificate()
				if got.GetName() != "server-cert" || string(tc.GetCertificateChain().GetInlineBytes()) != string(want[corev1.TLSCertKey]) ||
					string(tc.GetPrivateKey().GetInlineBytes()) != string(want[corev1.TLSPrivateKeyKey]) {
					t.Errorf("served %v", got)
				}
				return
			}
			if err == nil {
				t.Fatalf("served %v; want it refused: %s", got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "c2VjcmV0") || strings.Contains(err.Error(), "secret-key") {
				t.Errorf("error %q shows the Secret's data", err)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// Secret material inline is found in any resource, at any depth, inside
// typed configs too; public material (certificates, validation contexts)
// and data sources that point at the proxy's files are not.
func TestInlineKeyFields(t *testing.T) {
	downstream := func(cert string) string {
		return `{"name": "https", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8443}}, "filter_chains": [{
  "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
    "common_tls_context": {"tls_certificates": [` + cert + `]}}},
  "filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "k"}}]}]}`
	}
	upstream := `{"name": "k", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}}},
  "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
    "common_tls_context": {"tls_certificates": [{"certificate_chain": {"filename": "/c"}, "private_key": {"inline_string": "k"}}]}}}}`
	tests := []struct {
		name  string
		field string // spec.resources list
		raw   string
		want  []string
	}{
		{"private key as a string", "secrets", `{"name": "s", "tls_certificate": {"certificate_chain": {"inline_string": "c"}, "private_key": {"inline_string": "k"}}}`,
			[]string{"tls_certificate.private_key.inline_string"}},
		{"private key as bytes", "secrets", `{"name": "s", "tls_certificate": {"private_key": {"inline_bytes": "aw=="}}}`,
			[]string{"tls_certificate.private_key.inline_bytes"}},
		{"password and PKCS #12", "secrets", `{"name": "s", "tls_certificate": {"pkcs12": {"inline_bytes": "aw=="}, "password": {"inline_string": "p"}}}`,
			[]string{"tls_certificate.password.inline_string", "tls_certificate.pkcs12.inline_bytes"}},
		{"keys in files and the environment", "secrets", `{"name": "s", "tls_certificate": {"certificate_chain": {"filename": "/c"},
  "private_key": {"filename": "/k"}, "password": {"environment_variable": "P"}}}`, nil},
		{"a public certificate, OCSP staple and SCTs", "secrets", `{"name": "s", "tls_certificate": {"certificate_chain": {"inline_string": "c"},
  "ocsp_staple": {"inline_bytes": "bw=="}, "signed_certificate_timestamp": [{"inline_bytes": "cw=="}], "private_key": {"filename": "/k"}}}`, nil},
		{"a validation context", "secrets", `{"name": "s", "validation_context": {"trusted_ca": {"inline_string": "ca"}, "crl": {"inline_string": "crl"}}}`, nil},
		{"session ticket keys", "secrets", `{"name": "s", "session_ticket_keys": {"keys": [{"filename": "/t"}, {"inline_bytes": "dA=="}]}}`,
			[]string{"session_ticket_keys.keys[1].inline_bytes"}},
		{"a generic secret", "secrets", `{"name": "s", "generic_secret": {"secret": {"inline_string": "hmac"}}}`,
			[]string{"generic_secret.secret.inline_string"}},
		{"a generic secret's map", "secrets", `{"name": "s", "generic_secret": {"secrets": {"token": {"inline_string": "t"}}}}`,
			[]string{"generic_secret.secrets[token].inline_string"}},
		{"a listener's TLS certificate", "listeners", downstream(`{"certificate_chain": {"inline_string": "c"}, "private_key": {"inline_bytes": "aw=="}}`),
			[]string{"filter_chains[0].transport_socket.typed_config(DownstreamTlsContext).common_tls_context.tls_certificates[0].private_key.inline_bytes"}},
		{"a listener's certificate from files", "listeners", downstream(`{"certificate_chain": {"filename": "/c"}, "private_key": {"filename": "/k"}}`), nil},
		{"a cluster's client certificate", "clusters", upstream,
			[]string{"transport_socket.typed_config(UpstreamTlsContext).common_tls_context.tls_certificates[0].private_key.inline_string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decodeCase(t, tt.field, tt.raw)
			got := inlineKeyFields(m)
			slices.Sort(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("inline key fields = %q\nwant                %q", got, tt.want)
			}
		})
	}
}

// A Secret's content is live, like endpoints: a new certificate changes
// what the fleet is served, but not its revision (the content that is
// recorded, and its version), which never holds the Secret's data.
func TestSecretsAreLiveAndNeverRecorded(t *testing.T) {
	cfg := Config{Name: "ns/tls", Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge",
		TLSSecrets: []examplev1.TLSSecret{{Name: "server-cert", SecretRef: "web-tls"}}}}
	translate := func(cert string) IR {
		return Translate(Input{Configs: []Config{cfg}, Secrets: map[string]corev1.Secret{
			"web-tls": tlsSecretObject("web-tls", names.XDSSecretTLS, corev1.SecretTypeTLS, cert, testKey)}})
	}
	first := translate(testCert)
	renewed := strings.ReplaceAll(testCert, "Y2VydC1vbmU=", "Y2VydC10d28=")
	second := translate(renewed)
	if first.Version != second.Version {
		t.Errorf("a renewed certificate changed the revision's version from %s to %s", first.Version, second.Version)
	}
	served := func(ir IR) string {
		rs := ir.Resources[resourcev3.SecretType]
		if len(rs) != 1 {
			t.Fatalf("served secrets %v, want server-cert", rs)
		}
		return string(rs[0].(*tlsv3.Secret).GetTlsCertificate().GetCertificateChain().GetInlineBytes())
	}
	if served(first) != testCert || served(second) != renewed {
		t.Errorf("served %q, then %q", served(first), served(second))
	}
	for _, ir := range []IR{first, second} {
		recorded, err := json.Marshal(ir.Revision)
		if err != nil {
			t.Fatal(err)
		}
		for _, data := range []string{"c2VjcmV0", "Y2VydC1", "BEGIN"} {
			if strings.Contains(string(recorded), data) {
				t.Errorf("the revision holds the Secret's data (%s): %s", data, recorded)
			}
		}
		if !strings.Contains(string(recorded), `"tlsSecrets":[{"name":"server-cert","secretRef":"web-tls"}]`) {
			t.Errorf("the revision does not record the tlsSecrets names: %s", recorded)
		}
	}
}

// Admission refuses secret material inline, naming the field and pointing
// to spec.tlsSecrets; tlsSecrets names count as secrets for references.
func TestAdmitSecrets(t *testing.T) {
	sdsListener := raw(`{"name": "https", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8443}}, "filter_chains": [{
  "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
    "common_tls_context": {"tls_certificate_sds_secret_configs": [{"name": "server-cert", "sds_config": {"ads": {}}}]}}},
  "filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "k"}}]}]}`)
	L := config("l", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{sdsListener}, Clusters: []runtime.RawExtension{clusterNamed("k")}})
	S := config("s", examplev1.EnvoyResources{})
	S.Spec.TLSSecrets = []examplev1.TLSSecret{{Name: "server-cert", SecretRef: "web-tls"}}
	withoutEntry := config("s", examplev1.EnvoyResources{})
	inlineKey := config("s", examplev1.EnvoyResources{Secrets: []runtime.RawExtension{
		raw(`{"name": "server-cert", "tls_certificate": {"certificate_chain": {"inline_string": "c"}, "private_key": {"inline_string": "k"}}}`)}})
	inlineCA := config("s", examplev1.EnvoyResources{Secrets: []runtime.RawExtension{
		raw(`{"name": "server-cert", "validation_context": {"trusted_ca": {"inline_string": "ca"}}}`)}})
	tests := []struct {
		name   string
		before []Config
		change string
		after  *Config
		want   []string
	}{
		{"a listener whose SDS secret another config's tlsSecrets declare", []Config{S}, "ns/l", &L, nil},
		{"a listener whose SDS secret nobody declares", nil, "ns/l", &L,
			[]string{`spec.resources.listeners[0] ("https"): secret "server-cert" does not exist`}},
		{"dropping a tlsSecrets entry a listener needs", []Config{S, L}, "ns/s", &withoutEntry,
			[]string{`it would break EnvoyConfig ns/l: spec.resources.listeners[0] ("https"): secret "server-cert" does not exist`}},
		{"an inline private key", []Config{L}, "ns/s", &inlineKey,
			[]string{`spec.resources.secrets[0] ("server-cert"): tls_certificate.private_key.inline_string holds secret material inline, ` +
				`which an EnvoyConfig may not: serve a certificate and its key from a kubernetes.io/tls Secret labelled ` +
				`kube-envoy-controller.io/xds-secret: tls, named in spec.tlsSecrets`}},
		{"an inline CA certificate", []Config{L}, "ns/s", &inlineCA, nil},
		{"another config's inline key, stored before, is not this change's fault", []Config{inlineKey}, "ns/l", &L, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Admit(Policy{}, tt.before, tt.change, tt.after); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Admit = %q\nwant    %q", got, tt.want)
			}
		})
	}
}

// decodeCase decodes a test case's resource of the spec.resources list field.
func decodeCase(t *testing.T, field, raw string) proto.Message {
	t.Helper()
	kind, err := resource.KindNamed(field)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := resource.Decode(kind, []byte(raw))
	if err != nil {
		t.Fatalf("the case does not decode: %v", err)
	}
	return m
}
