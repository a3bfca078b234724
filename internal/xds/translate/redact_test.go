package translate

import (
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
)

// Redact hides exactly the secret material that admission refuses inline,
// at any depth and inside typed configs, keeps public material, and leaves
// the resource it is given as it was.
func TestRedact(t *testing.T) {
	secretBytes := base64.StdEncoding.EncodeToString([]byte("SECRET-BYTES"))
	tests := []struct {
		name, field, raw string
		hidden, kept     []string
	}{
		{"a TLS certificate", "secrets", `{"name": "s", "tls_certificate": {"certificate_chain": {"inline_string": "PUBLIC-CHAIN"},
  "private_key": {"inline_string": "SECRET-KEY"}, "password": {"inline_bytes": "` + secretBytes + `"}}}`,
			[]string{"SECRET-KEY", secretBytes}, []string{"PUBLIC-CHAIN"}},
		{"a generic secret and ticket keys", "secrets", `{"name": "s", "generic_secret": {"secrets": {"token": {"inline_string": "SECRET-TOKEN"}}}}`,
			[]string{"SECRET-TOKEN"}, nil},
		{"a validation context", "secrets", `{"name": "s", "validation_context": {"trusted_ca": {"inline_string": "PUBLIC-CA"}}}`,
			nil, []string{"PUBLIC-CA"}},
		{"a listener's key in a typed config", "listeners", `{"name": "https", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8443}}, "filter_chains": [{
  "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
    "common_tls_context": {"tls_certificates": [{"certificate_chain": {"inline_string": "PUBLIC-CHAIN"}, "private_key": {"inline_string": "SECRET-KEY"}}]}}},
  "filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "k"}}]}]}`,
			[]string{"SECRET-KEY"}, []string{"PUBLIC-CHAIN", "tcp_proxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decodeCase(t, tt.field, tt.raw)
			before, _ := protojson.Marshal(m)
			out, err := protojson.Marshal(Redact(m))
			if err != nil {
				t.Fatal(err)
			}
			got := string(out)
			for _, s := range tt.hidden {
				if strings.Contains(got, s) {
					t.Errorf("%q is shown: %s", s, got)
				}
			}
			if n := strings.Count(got, Redacted); n != len(tt.hidden) {
				t.Errorf("%d fields redacted, want %d: %s", n, len(tt.hidden), got)
			}
			for _, s := range tt.kept {
				if !strings.Contains(got, s) {
					t.Errorf("%q is not shown: %s", s, got)
				}
			}
			if after, _ := protojson.Marshal(m); string(after) != string(before) {
				t.Errorf("the resource given was changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}
