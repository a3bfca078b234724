package envoy

import (
	"bytes"
	"time"

	corev1 "k8s.io/api/core/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// ClientCertificate returns the Secret that holds e's client certificate for
// the built-in xDS server, and when to look at it again. It keeps the
// certificate of existing (the Secret as found, or nil) while the authority
// would still issue it (pki.Current), so that a settled fleet causes no
// write; it only brings the trusted CAs up to date. Otherwise it issues a new
// one: the first, one near its end, one of another fleet, or one the
// current signer did not sign.
func ClientCertificate(e *examplev1.Envoy, a pki.Authority, existing *corev1.Secret, now time.Time, o pki.Options) (*corev1.Secret, time.Time, error) {
	leaf := pki.Leaf{}
	if existing != nil {
		leaf = pki.Leaf{Cert: existing.Data[proxy.ClientCertFile], Key: existing.Data[proxy.ClientKeyFile]}
	}
	uri := pki.SPIFFEID(o.TrustDomain, fleet.Of(e)).String()
	ok, renew := pki.Current(leaf, a, uri, now, o)
	if !ok {
		var err error
		if leaf, err = pki.IssueClient(a, fleet.Of(e), now, o); err != nil {
			return nil, time.Time{}, err
		}
		_, renew = pki.Current(leaf, a, uri, now, o)
	}
	if at := pki.SignerChangesAt(a, now, o); !at.IsZero() && at.Before(renew) {
		renew = at
	}
	meta := objectMeta(e, fleet.ClientSecretName(e))
	meta.Labels = objects.MergeMaps(meta.Labels, map[string]string{names.XDSSecretLabel: names.XDSSecretClient})
	return &corev1.Secret{
		ObjectMeta: meta,
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			proxy.ClientCertFile: leaf.Cert,
			proxy.ClientKeyFile:  leaf.Key,
			proxy.TrustedCAFile:  a.Bundle(),
		},
	}, renew, nil
}

// sameCertificate reports whether two client certificate Secrets hold the
// same certificate (the CAs aside).
func sameCertificate(a, b *corev1.Secret) bool {
	return a != nil && b != nil && bytes.Equal(a.Data[proxy.ClientCertFile], b.Data[proxy.ClientCertFile])
}
