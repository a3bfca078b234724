package translate

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
)

// An EnvoyConfig is stored in etcd unencrypted, copied into kubectl's
// last-applied annotation and, at some audit levels, into audit logs; anyone
// who may read it reads all of it. So it may hold no secret material inline
// (inline_bytes or inline_string), in any resource:
//   - a TlsCertificate's private_key, password and pkcs12, and anything
//     inline in its private_key_provider's configuration;
//   - session ticket keys (TlsSessionTicketKeys.keys);
//   - a GenericSecret's secret and secrets.
//
// A TlsCertificate's certificate_chain, ocsp_staple and
// signed_certificate_timestamp are public and may stay inline, as may a
// validation_context (trusted CA certificates, CRLs). A DataSource that
// names a file or an environment variable of the proxy holds no secret.

// publicCertificateFields are the TlsCertificate fields that may be inline.
var publicCertificateFields = map[string]bool{
	"certificate_chain": true, "ocsp_staple": true, "signed_certificate_timestamp": true,
}

// inlineKeys returns a message for every secret material held inline in
// rs, naming the resource and the field.
func inlineKeys(rs []xds.Resource) []string {
	var out []string
	for _, r := range rs {
		for _, field := range inlineKeyFields(r.Message) {
			out = append(out, fmt.Sprintf("%s (%q): %s holds secret material inline, which an EnvoyConfig may not: "+
				"serve a certificate and its key from a kubernetes.io/tls Secret labelled %s: %s, named in spec.tlsSecrets",
				r.Path, r.Name, field, objects.XDSSecretLabel, objects.XDSSecretTLS))
		}
	}
	return out
}

// inlineKeyFields returns the paths, within m, of the inline DataSources
// that hold secret material.
func inlineKeyFields(m proto.Message) []string {
	if m == nil {
		return nil
	}
	var out []string
	walk(m, "", func(m proto.Message, path string) bool {
		switch s := m.(type) {
		case *tlsv3.TlsCertificate:
			walk(s, path, func(m proto.Message, inner string) bool {
				if inner != path && publicCertificateFields[firstField(inner[len(path):])] {
					return false
				}
				return collectInline(m, inner, &out)
			})
			return false
		case *tlsv3.TlsSessionTicketKeys, *tlsv3.GenericSecret:
			walk(s, path, func(m proto.Message, inner string) bool { return collectInline(m, inner, &out) })
			return false
		}
		return true
	})
	return out
}

// collectInline adds path to out when m is an inline DataSource; it says
// whether to look inside m.
func collectInline(m proto.Message, path string, out *[]string) bool {
	ds, ok := m.(*corev3.DataSource)
	if !ok {
		return true
	}
	switch ds.GetSpecifier().(type) {
	case *corev3.DataSource_InlineBytes:
		*out = append(*out, path+".inline_bytes")
	case *corev3.DataSource_InlineString:
		*out = append(*out, path+".inline_string")
	}
	return false
}

// firstField returns the first field of a relative path such as
// ".certificate_chain" or ".signed_certificate_timestamp[0]".
func firstField(rel string) string {
	if len(rel) > 0 && rel[0] == '.' {
		rel = rel[1:]
	}
	for i, c := range rel {
		if c == '.' || c == '[' || c == '(' {
			return rel[:i]
		}
	}
	return rel
}
