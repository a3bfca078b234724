package authority_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
)

const operatorNamespace = "xds-ca-publisher"

var (
	suite     testenv.Suite
	secretKey = types.NamespacedName{Namespace: operatorNamespace, Name: authority.DefaultSecretName}
	configKey = types.NamespacedName{Namespace: operatorNamespace, Name: authority.DefaultConfigMapName}
)

// The CA is External, kept by the test as cert-manager would keep it, so
// that the test decides when it changes; the publisher runs as in the operator.
func TestMain(m *testing.M) {
	suite.Main(m, func(mgr ctrl.Manager) error {
		c, err := client.New(mgr.GetConfig(), client.Options{})
		if err != nil {
			return err
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}
		if err := c.Create(context.Background(), ns); err != nil {
			return err
		}
		if _, err := authority.Add(mgr, authority.Config{Namespace: operatorNamespace, Options: pki.DefaultOptions, External: true}); err != nil {
			return err
		}
		suite.Reconciler = &authority.Publisher{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Secret: secretKey, ConfigMap: configKey}
		return nil
	})
}

// certManagerSecret is a CA Secret as cert-manager keeps it (tls.crt,
// tls.key), labelled so that the operator reads it.
func certManagerSecret(t *testing.T, a pki.Authority) *corev1.Secret {
	t.Helper()
	certs, keys, err := pki.Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretKey.Name, Namespace: secretKey.Namespace,
			Labels: map[string]string{names.XDSSecretLabel: names.XDSSecretCA}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certs, corev1.TLSPrivateKeyKey: keys},
	}
}

func newAuthority(t *testing.T) pki.Authority {
	t.Helper()
	a, _, err := pki.Rotate(pki.Authority{}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// waitPublished waits until the ConfigMap holds exactly a's certificates.
func waitPublished(t *testing.T, a pki.Authority) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	testenv.Eventually(t, "the CA certificates to be published", func() (bool, error) {
		err := suite.Client.Get(context.Background(), configKey, cm)
		return err == nil && cm.Data[authority.BundleKey] == string(a.Bundle()) && len(cm.Data) == 1 &&
			cm.Labels[names.ManagedByLabel] == names.ManagedByValue, client.IgnoreNotFound(err)
	})
	return cm
}

// The leader publishes the CA Secret's certificates, never its keys, puts
// them back when they are edited, follows a new CA, and writes nothing once
// they are published.
func TestPublisher(t *testing.T) {
	ctx := context.Background()
	first := newAuthority(t)
	sec := certManagerSecret(t, first)
	if err := suite.Client.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	cm := waitPublished(t, first)
	if strings.Contains(cm.Data[authority.BundleKey], "PRIVATE KEY") {
		t.Fatalf("the ConfigMap holds a private key:\n%s", cm.Data[authority.BundleKey])
	}

	t.Run("settled: no writes", func(t *testing.T) {
		suite.ExpectNoWrites(t, authority.PublisherName, cm, reconcile.Request{NamespacedName: secretKey})
	})

	t.Run("an edited ConfigMap is put back", func(t *testing.T) {
		cm := waitPublished(t, first)
		cm.Data = map[string]string{authority.BundleKey: "not a certificate", "extra": "x"}
		if err := suite.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		waitPublished(t, first)
	})

	t.Run("a ConfigMap that lost its label is taken back", func(t *testing.T) {
		// Without the label, the manager's cache does not see it.
		cm := waitPublished(t, first)
		cm.Labels = nil
		if err := suite.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		// A change of the CA Secret brings the publisher back.
		if err := suite.Client.Get(ctx, secretKey, sec); err != nil {
			t.Fatal(err)
		}
		sec.Annotations = map[string]string{"touched": time.Now().String()}
		if err := suite.Client.Update(ctx, sec); err != nil {
			t.Fatal(err)
		}
		waitPublished(t, first)
	})

	t.Run("a new CA is published", func(t *testing.T) {
		next := newAuthority(t)
		if err := suite.Client.Get(ctx, secretKey, sec); err != nil {
			t.Fatal(err)
		}
		sec.Data = certManagerSecret(t, next).Data
		if err := suite.Client.Update(ctx, sec); err != nil {
			t.Fatal(err)
		}
		waitPublished(t, next)
	})
}
