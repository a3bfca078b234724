package authority

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
)

// Decode reads the operator's own format and cert-manager's CA Secret.
func TestDecode(t *testing.T) {
	a, _, err := pki.Rotate(pki.Authority{}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	own, err := Secret(types.NamespacedName{Namespace: "ops", Name: DefaultSecretName}, a)
	if err != nil {
		t.Fatal(err)
	}
	certs, keys, err := pki.Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	managed := &corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{
		corev1.TLSCertKey: certs, corev1.TLSPrivateKeyKey: keys, "ca.crt": certs,
	}}
	for name, sec := range map[string]*corev1.Secret{"own": own, "cert-manager's": managed} {
		got, err := Decode(sec)
		if err != nil || !pki.Equal(got, a) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Decode(&corev1.Secret{Data: map[string][]byte{BundleKey: certs}}); err == nil {
		t.Error("a bundle without keys decoded")
	}
}
