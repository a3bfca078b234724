// Package authority keeps the xDS control plane's certificate authority in a
// Secret of the operator's namespace: the leader makes and rotates it
// (Rotator), and every replica reads it (Store) to serve xDS over mutual TLS
// and to issue the fleets' client certificates. What a CA is and when it
// rotates is decided by internal/pki; this package only reads and writes.
package authority

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
)

// DefaultSecretName is the Secret, in the operator's namespace, that holds the CA.
const DefaultSecretName = "kube-envoy-controller-xds-ca"

// Keys of the CA Secret.
const (
	// BundleKey holds every trusted CA certificate, newest first.
	BundleKey = names.CABundleKey
	// KeysKey holds their private keys, in the same order.
	KeysKey = "ca.key"
)

// ErrNoAuthority is returned until the leader has made the CA.
var ErrNoAuthority = errors.New("the xDS certificate authority does not exist yet")

// Store reads the CA from its Secret through the manager's cache (which
// keeps the Secrets labelled names.XDSSecretLabel), decoding it again only
// when the Secret changes.
type Store struct {
	Reader  client.Reader
	Key     types.NamespacedName
	Options pki.Options
	// Hosts are the names the xDS server's certificate is issued for.
	Hosts []string
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu      sync.Mutex
	version string // resourceVersion of the decoded Secret
	current pki.Authority
	pool    *x509.CertPool // current's CAs, for every handshake
	server  *serverCert
}

type serverCert struct {
	cert    *tls.Certificate
	renew   time.Time
	signerT time.Time // NotBefore of the CA that signed it
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Authority returns the current CA.
func (s *Store) Authority(ctx context.Context) (pki.Authority, error) {
	sec := &corev1.Secret{}
	if err := s.Reader.Get(ctx, s.Key, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return pki.Authority{}, ErrNoAuthority
		}
		return pki.Authority{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec.ResourceVersion == s.version && !s.current.Empty() {
		return s.current, nil
	}
	a, err := Decode(sec)
	if err != nil {
		return pki.Authority{}, fmt.Errorf("the xDS CA Secret %s: %w", s.Key, err)
	}
	if a.Empty() {
		return pki.Authority{}, ErrNoAuthority
	}
	s.version, s.current, s.pool = sec.ResourceVersion, a, a.Pool()
	return a, nil
}

// ServerConfig is the TLS configuration of one xDS connection: the server's
// certificate, issued from the current signer and renewed as it ages, and
// the trusted CAs, whose certificate every client must present.
func (s *Store) ServerConfig(ctx context.Context) (*tls.Config, error) {
	cert, pool, err := s.serverCertificate(ctx)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{*cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"h2"},
	}, nil
}

// ServerCertificate is the server's certificate, as ServerConfig serves it,
// for the operator's other TLS servers on the same hosts (the debug
// endpoint), whose clients verify it against the published CAs.
func (s *Store) ServerCertificate(ctx context.Context) (*tls.Certificate, error) {
	cert, _, err := s.serverCertificate(ctx)
	return cert, err
}

// serverCertificate returns the server's certificate, issued or renewed
// when needed, and the pool of the trusted CAs.
func (s *Store) serverCertificate(ctx context.Context) (*tls.Certificate, *x509.CertPool, error) {
	a, err := s.Authority(ctx)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	signer := a.Signer(now, s.Options)
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc := s.server; sc == nil || !now.Before(sc.renew) || !sc.signerT.Equal(signer.Cert.NotBefore) {
		leaf, err := pki.IssueServer(a, s.Hosts, now, s.Options)
		if err != nil {
			return nil, nil, err
		}
		cert, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
		if err != nil {
			return nil, nil, err
		}
		_, renew := pki.Current(leaf, a, "", now, s.Options)
		s.server = &serverCert{cert: &cert, renew: renew, signerT: signer.Cert.NotBefore}
	}
	return s.server.cert, s.pool, nil
}

// Decode reads the authority in a CA Secret: in the operator's own format
// (BundleKey and KeysKey), or as cert-manager keeps a CA (tls.crt the CA's
// certificate, tls.key its key).
func Decode(sec *corev1.Secret) (pki.Authority, error) {
	if len(sec.Data[KeysKey]) == 0 && len(sec.Data[corev1.TLSCertKey]) > 0 {
		return pki.Decode(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	}
	return pki.Decode(sec.Data[BundleKey], sec.Data[KeysKey])
}

// Secret returns the CA Secret for a.
func Secret(key types.NamespacedName, a pki.Authority) (*corev1.Secret, error) {
	certs, keys, err := pki.Encode(a)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels: map[string]string{
				names.ManagedByLabel: names.ManagedByValue,
				names.XDSSecretLabel: names.XDSSecretCA,
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{BundleKey: certs, KeysKey: keys},
	}, nil
}

// Config says where the CA lives and what the xDS server's certificate names.
type Config struct {
	// Namespace is the operator's namespace, and SecretName the CA Secret's
	// name in it (DefaultSecretName when empty).
	Namespace  string
	SecretName string
	Options    pki.Options
	// Hosts are the names the xDS server's certificate is issued for.
	Hosts []string
	// External: the CA Secret is kept by someone else (cert-manager, say),
	// and the operator neither makes nor rotates it.
	External bool
}

// Add registers the leader's Rotator (unless the CA is External) and
// Publisher on mgr, and returns the Store every replica reads the CA from.
func Add(mgr ctrl.Manager, c Config) (*Store, error) {
	if err := c.Options.Check(); err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: c.Namespace, Name: cmp.Or(c.SecretName, DefaultSecretName)}
	store := &Store{Reader: mgr.GetClient(), Key: key, Options: c.Options, Hosts: c.Hosts}
	pub := &Publisher{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Secret: key,
		ConfigMap: types.NamespacedName{Namespace: c.Namespace, Name: DefaultConfigMapName}}
	if err := pub.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the xDS CA publisher: %w", err)
	}
	if c.External {
		return store, nil
	}
	r := &Rotator{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Key: key, Options: c.Options}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the xDS CA rotator: %w", err)
	}
	return store, nil
}
