package envoy

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
)

func leafOf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(s.Data[proxy.ClientCertFile])
	if b == nil {
		t.Fatalf("Secret %s has no certificate", s.Name)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verifies reports whether the Secret's certificate is a client
// certificate that chains to the CAs the Secret itself carries.
func verifies(s *corev1.Secret) bool {
	b, _ := pem.Decode(s.Data[proxy.ClientCertFile])
	if b == nil {
		return false
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return false
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data[proxy.TrustedCAFile]) {
		return false
	}
	_, err = c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

func newBuiltinEnvoy(t *testing.T, ns, name string) *examplev1.Envoy {
	t.Helper()
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := suite.Client.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return e
}

// A fleet of the built-in server gets its own client certificate, naming
// the fleet, in a Secret it controls, which its pods mount next to the SDS
// files of the bootstrap; a settled fleet rewrites none of it.
func TestFleetGetsItsClientCertificate(t *testing.T) {
	ns := suite.Namespace(t)
	e := newBuiltinEnvoy(t, ns, "edge")
	sec := testenv.WaitFor(t, suite.Client, ns, "edge-xds-client", &corev1.Secret{}, verifies)
	if sec.Type != corev1.SecretTypeTLS || !metav1.IsControlledBy(sec, e) || sec.Labels[names.XDSSecretLabel] != names.XDSSecretClient {
		t.Errorf("Secret type %s, owners %v, labels %v", sec.Type, sec.OwnerReferences, sec.Labels)
	}
	got, err := pki.FleetOf(leafOf(t, sec), testPKI.TrustDomain)
	if err != nil || got != fleet.Of(e) {
		t.Errorf("the certificate names %s (%v), want %s/edge", got, err, ns)
	}
	a, err := ca.Authority(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sec.Data[proxy.TrustedCAFile], a.Bundle()) {
		t.Error("the Secret's ca.crt is not the authority's bundle")
	}

	cm := testenv.WaitFor(t, suite.Client, ns, "edge-bootstrap", &corev1.ConfigMap{}, nil)
	for _, k := range []string{proxy.BootstrapKey, proxy.ClientCertSDSFile, proxy.TrustedCASDSFile} {
		if cm.Data[k] == "" {
			t.Errorf("the bootstrap ConfigMap lacks %s", k)
		}
	}
	d := testenv.WaitFor(t, suite.Client, ns, "edge", &appsv1.Deployment{}, nil)
	mounted := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		mounted = mounted || (v.Secret != nil && v.Secret.SecretName == "edge-xds-client")
	}
	if !mounted {
		t.Errorf("the fleet's pods do not mount its certificate: %+v", d.Spec.Template.Spec.Volumes)
	}

	suite.PlayDeploymentController(t, d)
	settled(t, e)
	suite.ExpectNoWrites(t, ControllerName, e, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})
}

// A certificate in the last third of its life, or one for another fleet,
// is replaced; so is one that somebody emptied.
func TestClientCertificateIsRenewed(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	newBuiltinEnvoy(t, ns, "edge")
	first := testenv.WaitFor(t, suite.Client, ns, "edge-xds-client", &corev1.Secret{}, verifies)
	a, err := ca.Authority(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, err := pki.IssueClient(a, fleet.ID{Namespace: ns, Name: "edge"}, time.Now().Add(-17*time.Hour), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.IssueClient(a, fleet.ID{Namespace: ns, Name: "other"}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	for name, leaf := range map[string]pki.Leaf{"aging": old, "another fleet's": other, "empty": {}} {
		sec := first.DeepCopy()
		sec.Data[proxy.ClientCertFile], sec.Data[proxy.ClientKeyFile] = leaf.Cert, leaf.Key
		if err := suite.Client.Update(ctx, sec); err != nil {
			t.Fatal(err)
		}
		renewed := testenv.WaitFor(t, suite.Client, ns, "edge-xds-client", &corev1.Secret{}, func(s *corev1.Secret) bool {
			return verifies(s) && !bytes.Equal(s.Data[proxy.ClientCertFile], leaf.Cert)
		})
		if c := leafOf(t, renewed); time.Until(c.NotAfter) < 23*time.Hour || c.URIs[0].String() != pki.SPIFFEID(testPKI.TrustDomain, fleet.ID{Namespace: ns, Name: "edge"}).String() {
			t.Errorf("%s: renewed certificate expires %s, names %v", name, c.NotAfter, c.URIs)
		}
		first = renewed
	}
}

// A rotation of the CA reaches every fleet: first its bundle, with the old
// and the new CA, then, once the new CA signs, a certificate from it. The
// certificate the old CA issued verifies against the new bundle all along.
func TestCARotationReachesTheFleet(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	newBuiltinEnvoy(t, ns, "edge")
	before := testenv.WaitFor(t, suite.Client, ns, "edge-xds-client", &corev1.Secret{}, verifies)

	// Age the CA: one in the last third of its life replaces the current.
	aging, err := pki.NewCA(time.Now().Add(-25*24*time.Hour), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	want, err := authority.Secret(ca.Key, pki.Authority{CAs: []pki.CA{aging}})
	if err != nil {
		t.Fatal(err)
	}
	caSecret := &corev1.Secret{}
	if err := suite.Client.Get(ctx, ca.Key, caSecret); err != nil {
		t.Fatal(err)
	}
	caSecret.Data = want.Data
	if err := suite.Client.Update(ctx, caSecret); err != nil {
		t.Fatal(err)
	}
	// The rotator adds a successor; the fleet's Secret gets both CAs.
	rotated := testenv.WaitFor(t, suite.Client, ca.Key.Namespace, ca.Key.Name, &corev1.Secret{}, func(s *corev1.Secret) bool {
		a, err := pki.Decode(s.Data[authority.BundleKey], s.Data[authority.KeysKey])
		return err == nil && len(a.CAs) == 2 && a.CAs[1].Cert.Equal(aging.Cert)
	})
	next, err := pki.Decode(rotated.Data[authority.BundleKey], rotated.Data[authority.KeysKey])
	if err != nil {
		t.Fatal(err)
	}
	// Every version of the fleet's Secret on the way holds a certificate
	// that verifies against the Secret's own bundle, and one of the bundles
	// the authority had: the first CA's, the aging one's alone (the test's
	// replacement, until the rotator adds a successor), or the aging and
	// the new CA's. Any other fails the test at once.
	bundles := map[string]string{
		string(before.Data[proxy.TrustedCAFile]):             "the first CA's",
		string(pki.Authority{CAs: []pki.CA{aging}}.Bundle()): "the aging CA's",
		string(next.Bundle()):                                "the aging and the new CA's",
	}
	after := &corev1.Secret{}
	testenv.Eventually(t, "a certificate of the new CA, with the old and the new CA trusted", func() (bool, error) {
		if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge-xds-client"}, after); err != nil {
			return false, err
		}
		bundle, known := bundles[string(after.Data[proxy.TrustedCAFile])]
		switch {
		case !known:
			return false, testenv.Unexpected("the fleet's Secret trusts a bundle the authority never had")
		case !verifies(after):
			return false, testenv.Unexpected("the fleet's certificate does not verify against its Secret's bundle, %s", bundle)
		case bundle != "the aging and the new CA's":
			return false, fmt.Errorf("the Secret trusts %s", bundle)
		case leafOf(t, after).CheckSignatureFrom(next.CAs[0].Cert) != nil:
			return false, fmt.Errorf("the certificate is not from the new CA yet")
		}
		return true, nil
	})
	// The certificate from before the rotation was issued by a CA that is no
	// longer trusted here (the test replaced it): the fleet must have moved on.
	if bytes.Equal(after.Data[proxy.ClientCertFile], before.Data[proxy.ClientCertFile]) {
		t.Error("the fleet kept a certificate of a CA the authority no longer has")
	}
}

// A fleet of another xDS server gets no certificate.
func TestExternalXDSFleetGetsNoCertificate(t *testing.T) {
	ns := suite.Namespace(t)
	e := applySample(t, ns) // its spec.xds names a server of its own
	settled(t, e)
	sec := &corev1.Secret{}
	err := suite.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: fleet.ClientSecretName(e)}, sec)
	if err == nil {
		t.Errorf("a fleet of another xDS server got Secret %s", sec.Name)
	}
}

// builtinSettled makes a fleet of the built-in server, with its client
// certificate, rolled out and settled, and returns it with its Secret.
func builtinSettled(t *testing.T) (*examplev1.Envoy, *corev1.Secret) {
	t.Helper()
	ns := suite.Namespace(t)
	e := newBuiltinEnvoy(t, ns, "edge")
	sec := testenv.WaitFor(t, suite.Client, ns, "edge-xds-client", &corev1.Secret{}, verifies)
	suite.PlayDeploymentController(t, testenv.WaitFor(t, suite.Client, ns, "edge", &appsv1.Deployment{}, nil))
	return settled(t, e), sec
}

// A client certificate Secret that cannot be read is not one that is
// missing: the reconcile fails, to be retried with backoff, Degraded with
// the API server's reason, and the fleet keeps its certificate, so its
// identity.
func TestUnreadableCertificateIsNotReissued(t *testing.T) {
	ctx := context.Background()
	e, before := builtinSettled(t)
	r := *suite.Reconciler.(*Reconciler)
	r.Client = testenv.Faulty(r.Client, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok && key.Name == before.Name {
				return apierrors.NewServerTimeout(corev1.Resource("secrets"), "get", 1)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	// The status goes Degraded with the reason, and its Warning event tells
	// (the running controller, which reads the Secret, sets it back). A
	// status write that loses a race with the running controller's twice is
	// requeued, the event unrecorded: the reconcile is retried, as the
	// controller retries it, until the event is there.
	want := "Warning " + string(metav1.StatusReasonServerTimeout) + " reading the fleet's client certificate Secret"
	testenv.Eventually(t, "event "+want, func() (bool, error) {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})
		if !apierrors.IsServerTimeout(err) {
			return false, testenv.Unexpected("the reconcile returned %v, want the failed read", err)
		}
		evs, err := suite.Events(e.Namespace, e.Name)
		for _, ev := range evs {
			if strings.HasPrefix(ev, want) {
				return true, nil
			}
		}
		return false, err
	})
	after := &corev1.Secret{}
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(before), after); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Data[proxy.ClientCertFile], before.Data[proxy.ClientCertFile]) || after.ResourceVersion != before.ResourceVersion {
		t.Error("a failed read of the Secret replaced the fleet's certificate")
	}
}

// The certificate's renewal is judged by the reconciler's clock, and so is
// when to look again.
func TestCertificateRenewalUsesTheClock(t *testing.T) {
	ctx := context.Background()
	e, sec := builtinSettled(t)
	clock := time.Now().Add(time.Hour).Truncate(time.Second)
	r := *suite.Reconciler.(*Reconciler)
	r.Now = func() time.Time { return clock }
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.Authority(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, renew, err := ClientCertificate(e, a, sec, clock, testPKI)
	if err != nil {
		t.Fatal(err)
	}
	if want := renew.Sub(clock); res.RequeueAfter != want {
		t.Errorf("RequeueAfter = %s, want %s: the renewal at %s as the clock tells", res.RequeueAfter, want, renew)
	}
}
