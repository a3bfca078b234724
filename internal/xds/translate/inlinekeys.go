package translate

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
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
// names a file or an environment variable of the proxy holds no secret
// inline; whether it may name them is the content policy's question (see
// Policy).

// publicCertificateFields are the TlsCertificate fields that may be inline.
var publicCertificateFields = map[string]bool{
	"certificate_chain": true, "ocsp_staple": true, "signed_certificate_timestamp": true,
}

// inlineKeys returns a message for every secret material held inline in
// rs, naming the resource and the field.
func inlineKeys(rs []resource.Resource) []string {
	var out []string
	for _, r := range rs {
		for _, field := range inlineKeyFields(r.Message) {
			out = append(out, fmt.Sprintf("%s (%q): %s holds secret material inline, which an EnvoyConfig may not: "+
				"serve a certificate and its key from a kubernetes.io/tls Secret labelled %s: %s, named in spec.tlsSecrets",
				r.Path, r.Name, field, names.XDSSecretLabel, names.XDSSecretTLS))
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
	secretInline(m, walk, func(ds *corev3.DataSource, path string) {
		switch ds.GetSpecifier().(type) {
		case *corev3.DataSource_InlineBytes:
			out = append(out, path+".inline_bytes")
		case *corev3.DataSource_InlineString:
			out = append(out, path+".inline_string")
		}
	})
	return out
}

// Redacted replaces secret material in what Redact returns.
const Redacted = "[redacted]"

// Redact returns a copy of m in which every inline DataSource that holds
// secret material (the fields that an EnvoyConfig may not hold inline, see
// above) holds Redacted instead, inside Anys too: what may be shown of a
// resource that is served, whose secrets come from Kubernetes Secrets.
func Redact(m proto.Message) proto.Message {
	if m == nil {
		return nil
	}
	c := proto.Clone(m)
	secretInline(c, walkRewriting, func(ds *corev3.DataSource, _ string) {
		ds.Specifier = &corev3.DataSource_InlineString{InlineString: Redacted}
	})
	return c
}

// secretInline calls found for every inline DataSource within m that holds
// secret material, with its path, as walker (walk, or walkRewriting for a
// found that changes them) reaches it.
func secretInline(m proto.Message, walker func(proto.Message, string, func(proto.Message, string) bool), found func(ds *corev3.DataSource, path string)) {
	collect := func(m proto.Message, path string) bool {
		ds, ok := m.(*corev3.DataSource)
		if !ok {
			return true
		}
		switch ds.GetSpecifier().(type) {
		case *corev3.DataSource_InlineBytes, *corev3.DataSource_InlineString:
			found(ds, path)
		}
		return false
	}
	walker(m, "", func(m proto.Message, path string) bool {
		switch s := m.(type) {
		case *tlsv3.TlsCertificate:
			walker(s, path, func(m proto.Message, inner string) bool {
				if inner != path && publicCertificateFields[firstField(inner[len(path):])] {
					return false
				}
				return collect(m, inner)
			})
			return false
		case *tlsv3.TlsSessionTicketKeys, *tlsv3.GenericSecret:
			walker(s, path, collect)
			return false
		}
		return true
	})
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
