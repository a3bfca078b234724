package translate

import (
	"encoding/pem"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

var secretKind = resource.KindOf(resourcev3.SecretType)

// servedSecret returns the SDS secret name that the Secret s serves to a
// fleet: a tls_certificate from its tls.crt and tls.key. s is nil when no
// Secret of that name carries the label names.XDSSecretLabel (the
// operator reads no other). Only a Secret of type kubernetes.io/tls whose
// label says names.XDSSecretTLS is served: the label is its owner's
// consent, and other values mark Secrets of the operator's own (a fleet's
// client certificate, the xDS CA) that are never served. The error says
// why s serves nothing; it never holds the Secret's data.
func servedSecret(name string, s *corev1.Secret) (*tlsv3.Secret, error) {
	switch {
	case s == nil:
		return nil, fmt.Errorf("does not exist, or is not labelled %s: %s", names.XDSSecretLabel, names.XDSSecretTLS)
	case s.Labels[names.XDSSecretLabel] != names.XDSSecretTLS:
		return nil, fmt.Errorf("is labelled %s: %q; only %q is served", names.XDSSecretLabel, s.Labels[names.XDSSecretLabel], names.XDSSecretTLS)
	case s.Type != corev1.SecretTypeTLS:
		return nil, fmt.Errorf("is of type %q, not %s", s.Type, corev1.SecretTypeTLS)
	case !hasPEM(s.Data[corev1.TLSCertKey], func(typ string) bool { return typ == "CERTIFICATE" }):
		return nil, fmt.Errorf("has no PEM certificate in %s", corev1.TLSCertKey)
	case !hasPEM(s.Data[corev1.TLSPrivateKeyKey], isPrivateKeyBlock):
		return nil, fmt.Errorf("has no unencrypted PEM private key in %s", corev1.TLSPrivateKeyKey)
	}
	sec := &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.Data[corev1.TLSCertKey]}},
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.Data[corev1.TLSPrivateKeyKey]}},
	}}}
	if err := sec.ValidateAll(); err != nil {
		return nil, fmt.Errorf("does not make a valid SDS secret: %s", describeInvalid(err))
	}
	return sec, nil
}

// hasPEM reports whether data holds a PEM block of a type that want accepts.
func hasPEM(data []byte, want func(typ string) bool) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if want(b.Type) {
			return true
		}
	}
}

// isPrivateKeyBlock accepts the PEM private keys Envoy reads without a
// password: PKCS #8, PKCS #1 (RSA) and SEC 1 (EC).
func isPrivateKeyBlock(typ string) bool {
	return typ == "PRIVATE KEY" || typ == "RSA PRIVATE KEY" || typ == "EC PRIVATE KEY"
}

// describeInvalid keeps of a validation error only the fields it names: the
// message of a failed rule may quote the value, here key material.
func describeInvalid(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ":"); i > 0 {
		return msg[:i]
	}
	return "invalid"
}

// tlsSecretResources returns the SDS secrets that c's spec.tlsSecrets
// declare. With secrets nil, every declared name is a placeholder (a nil
// Message): references and name clashes depend on what is declared, not on
// the Secrets as they are now. Otherwise a declared name whose Secret
// serves nothing stays a placeholder, which takes its name but is not served.
func tlsSecretResources(c Config, secrets map[string]corev1.Secret) []resource.Resource {
	out := make([]resource.Resource, 0, len(c.Spec.TLSSecrets))
	for i, ts := range c.Spec.TLSSecrets {
		r := resource.Resource{Kind: secretKind, Name: ts.Name, Path: fmt.Sprintf("spec.tlsSecrets[%d]", i), Source: c.Name}
		if secrets != nil {
			if s, ok := secrets[ts.SecretRef]; ok {
				if m, err := servedSecret(ts.Name, &s); err == nil {
					r.Message = m
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// secretWarnings explains the spec.tlsSecrets whose Secret serves nothing.
func secretWarnings(ts []examplev1.TLSSecret, secrets map[string]corev1.Secret) []string {
	var out []string
	for i, t := range ts {
		var s *corev1.Secret
		if found, ok := secrets[t.SecretRef]; ok {
			s = &found
		}
		if _, err := servedSecret(t.Name, s); err != nil {
			out = append(out, fmt.Sprintf("spec.tlsSecrets[%d] (%q): Secret %q %v, so the secret is not served", i, t.Name, t.SecretRef, err))
		}
	}
	return out
}

// duplicateSecretNames refuses a tlsSecrets name that c's inline secrets
// also define: within one EnvoyConfig a name means one thing.
func duplicateSecretNames(c Config, inline []resource.Resource) []error {
	defined := map[string]string{}
	for _, r := range inline {
		if r.Kind.TypeURL == resourcev3.SecretType {
			defined[r.Name] = r.Path
		}
	}
	var errs []error
	for i, ts := range c.Spec.TLSSecrets {
		if path, dup := defined[ts.Name]; dup {
			errs = append(errs, fmt.Errorf("spec.tlsSecrets[%d] (%q): secret %q is already defined at %s", i, ts.Name, ts.Name, path))
		}
	}
	return errs
}
