package envoyconfig

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// certificate returns a new certificate for cn and its key, in PEM.
func certificate(t *testing.T, cn string) (crt, key []byte) {
	t.Helper()
	return xdstest.ServingCertificate(t, cn)
}

// tlsSecret is a kubernetes.io/tls Secret for cn, labelled
// names.XDSSecretLabel: label unless label is "".
func tlsSecret(t *testing.T, ns, name, label, cn string) *corev1.Secret {
	t.Helper()
	crt, key := certificate(t, cn)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
	if label != "" {
		s.Labels = map[string]string{names.XDSSecretLabel: label}
	}
	return s
}

func tlsConfig(ns, name, envoy string, secrets ...examplev1.TLSSecret) *examplev1.EnvoyConfig {
	return &examplev1.EnvoyConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: envoy, TLSSecrets: secrets},
	}
}

// nextSecrets ACKs the proxy's next SDS response and returns its version
// and its secrets by name.
func nextSecrets(t *testing.T, p *xdstest.Proxy) (string, map[string]*tlsv3.Secret) {
	t.Helper()
	resp, err := p.Next("")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tlsv3.Secret{}
	for _, a := range resp.GetResources() {
		s := &tlsv3.Secret{}
		if err := a.UnmarshalTo(s); err != nil {
			t.Fatal(err)
		}
		out[s.GetName()] = s
	}
	return resp.GetVersionInfo(), out
}

// waitSecret reads the proxy's SDS responses until one serves name with
// the certificate chain crt, and returns that response's version.
func waitSecret(t *testing.T, p *xdstest.Proxy, name string, crt []byte) string {
	t.Helper()
	for range 10 {
		version, secrets := nextSecrets(t, p)
		if s, ok := secrets[name]; ok && string(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes()) == string(crt) {
			return version
		}
	}
	t.Fatalf("no SDS response served %s with the expected certificate in ten responses", name)
	return ""
}

// A labelled kubernetes.io/tls Secret named in spec.tlsSecrets is served
// to its fleet's proxies over SDS, to no other fleet's, and a new
// certificate in it reaches a connected proxy live. Its data is never
// written to the revision history, status or events.
func TestTLSSecretServedToItsFleetOnly(t *testing.T) {
	ctx := context.Background()
	ns, fleetA := newFleet(t)
	secret := tlsSecret(t, ns, "web-tls", names.XDSSecretTLS, "web.example.com")
	create(t, secret)
	cfg := tlsConfig(ns, "tls", "edge", examplev1.TLSSecret{Name: "server-cert", SecretRef: "web-tls"})
	create(t, cfg)

	// Fleet B, in the same namespace, serves a Secret of its own.
	other := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
	create(t, other)
	fleetB := fleet.Of(other).String()
	create(t, tlsSecret(t, ns, "other-tls", names.XDSSecretTLS, "other.example.com"))
	create(t, tlsConfig(ns, "other-tls", "other", examplev1.TLSSecret{Name: "other-cert", SecretRef: "other-tls"}))
	// Fleet C, in another namespace, names a Secret of the same name as A's:
	// only its own namespace's would do, and there is none.
	nsC := suite.Namespace(t)
	create(t, &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: nsC}})
	cfgC := tlsConfig(nsC, "tls", "edge", examplev1.TLSSecret{Name: "server-cert", SecretRef: "web-tls"})
	create(t, cfgC)

	addr := xdsClient(t)
	a := xdstest.Connect(t, dialFleet(t, addr, fleetA), fleetA, "pod-a", resourcev3.SecretType, "server-cert")
	v1 := waitSecret(t, a, "server-cert", secret.Data[corev1.TLSCertKey])
	if s := xdsServer.Resources(fleetA)[resourcev3.SecretType]; len(s) != 1 ||
		string(s[0].(*tlsv3.Secret).GetTlsCertificate().GetPrivateKey().GetInlineBytes()) != string(secret.Data[corev1.TLSPrivateKeyKey]) {
		t.Errorf("fleet A is served secrets %v, want server-cert with the Secret's key", s)
	}
	got := waitStatus(t, cfg, "published and not degraded", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == "True" && condition(c, examplev1.EnvoyConfigConditionDegraded).Status == "False"
	})

	// B's proxy asks for both names: it gets its own secret, never A's.
	testenv.Eventually(t, "fleet B to serve its secret", func() (bool, error) {
		return len(xdsServer.Resources(fleetB)[resourcev3.SecretType]) == 1, nil
	})
	b := xdstest.Connect(t, dialFleet(t, addr, fleetB), fleetB, "pod-b", resourcev3.SecretType, "other-cert", "server-cert")
	if _, secrets := nextSecrets(t, b); len(secrets) != 1 || secrets["other-cert"] == nil {
		t.Errorf("fleet B's proxy got secrets %v, want other-cert only", keys(secrets))
	}
	// C's proxy gets nothing, and C's EnvoyConfig says why.
	gotC := waitStatus(t, cfgC, "C to be told", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionDegraded).Reason == examplev1.EnvoyConfigReasonSecretUnavailable
	})
	if msg := condition(gotC, examplev1.EnvoyConfigConditionDegraded).Message; !strings.Contains(msg, `Secret "web-tls" does not exist, or is not labelled`) {
		t.Errorf("C's Degraded message: %q", msg)
	}
	fleetC := nsC + "/edge"
	c := xdstest.Connect(t, dialFleet(t, addr, fleetC), fleetC, "pod-c", resourcev3.SecretType, "server-cert")
	if _, secrets := nextSecrets(t, c); len(secrets) != 0 {
		t.Errorf("fleet C's proxy got secrets %v, want none", keys(secrets))
	}

	// A renewed certificate reaches A's connected proxy, as a new SDS
	// version, without a new revision of the fleet.
	renewed := tlsSecret(t, ns, "web-tls", names.XDSSecretTLS, "web.example.com")
	patch := client.MergeFrom(secret.DeepCopy())
	secret.Data = renewed.Data
	if err := suite.Client.Patch(ctx, secret, patch); err != nil {
		t.Fatal(err)
	}
	v2 := waitSecret(t, a, "server-cert", renewed.Data[corev1.TLSCertKey])
	if v2 == v1 {
		t.Errorf("the renewed certificate came with the old SDS version %s", v1)
	}
	if now := xdsServer.Version(fleetA); now != got.Status.PublishedVersion {
		t.Errorf("the fleet's revision moved from %s to %s on a Secret change", got.Status.PublishedVersion, now)
	}

	// Neither certificate nor key is in the revision history, status or events.
	stored := &corev1.ConfigMap{}
	id := fleet.ID{Namespace: ns, Name: "edge"}
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: history.Name(id)}, stored); err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(stored, operatorNamespace, id)
	if err != nil {
		t.Fatal(err)
	}
	recorded, _ := json.Marshal(h)
	if !strings.Contains(string(recorded), `"secretRef":"web-tls"`) {
		t.Errorf("the history does not record the tlsSecrets entry: %s", recorded)
	}
	status, _ := json.Marshal(got.Status)
	evs, err := suite.Events(ns, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"the revision history": string(recorded), "status": string(status), "events": strings.Join(evs, "\n")} {
		for _, s := range []*corev1.Secret{secret, renewed} {
			for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
				body := strings.Split(string(s.Data[k]), "\n")[1] // the first line of base64 of the PEM block
				if strings.Contains(text, body) || strings.Contains(text, "PRIVATE KEY") {
					t.Errorf("%s holds the Secret's %s", what, k)
				}
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Only a kubernetes.io/tls Secret that its owner labelled
// kube-envoy-controller.io/xds-secret: tls is served. Without the label,
// with another value (the operator's own Secrets), or of another type, it is
// not, and the EnvoyConfig says why; once labelled, it is served live.
func TestUnlabelledSecretIsNotServed(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	unlabelled := tlsSecret(t, ns, "web-tls", "", "web.example.com")
	create(t, unlabelled)
	opaque := tlsSecret(t, ns, "opaque", names.XDSSecretTLS, "opaque.example.com")
	opaque.Type = corev1.SecretTypeOpaque
	create(t, opaque)
	cfg := tlsConfig(ns, "tls", "edge",
		examplev1.TLSSecret{Name: "server-cert", SecretRef: "web-tls"},
		examplev1.TLSSecret{Name: "opaque-cert", SecretRef: "opaque"})
	create(t, cfg)

	degraded := func(want string) {
		t.Helper()
		got := waitStatus(t, cfg, "Degraded to say "+want, func(c *examplev1.EnvoyConfig) bool {
			d := condition(c, examplev1.EnvoyConfigConditionDegraded)
			return d.Reason == examplev1.EnvoyConfigReasonSecretUnavailable && strings.Contains(d.Message, want)
		})
		if c := condition(got, examplev1.EnvoyConfigConditionPublished); c.Status != "True" {
			t.Errorf("Published = %+v: a Secret is live content, the configuration is published all the same", c)
		}
		if msg := condition(got, examplev1.EnvoyConfigConditionDegraded).Message; !strings.Contains(msg, `Secret "opaque" is of type "Opaque", not kubernetes.io/tls`) {
			t.Errorf("Degraded does not say why the Opaque Secret is not served: %q", msg)
		}
	}
	degraded(`Secret "web-tls" does not exist, or is not labelled kube-envoy-controller.io/xds-secret: tls`)
	p := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.SecretType, "server-cert", "opaque-cert")
	if _, secrets := nextSecrets(t, p); len(secrets) != 0 {
		t.Fatalf("the proxy got secrets %v, want none", keys(secrets))
	}

	// The label of the operator's own Secrets is not consent.
	label := func(value string) {
		t.Helper()
		patch := client.MergeFrom(unlabelled.DeepCopy())
		unlabelled.Labels = map[string]string{names.XDSSecretLabel: value}
		if err := suite.Client.Patch(ctx, unlabelled, patch); err != nil {
			t.Fatal(err)
		}
	}
	label(names.XDSSecretClient)
	degraded(`Secret "web-tls" is labelled kube-envoy-controller.io/xds-secret: "client-certificate"; only "tls" is served`)
	if s := xdsServer.Resources(fleetID)[resourcev3.SecretType]; len(s) != 0 {
		t.Fatalf("the fleet serves %v, want no secret", s)
	}

	// Its owner consents: the proxy gets it, and only the Opaque one is left.
	label(names.XDSSecretTLS)
	waitSecret(t, p, "server-cert", unlabelled.Data[corev1.TLSCertKey])
	got := waitStatus(t, cfg, "only the Opaque Secret to be left", func(c *examplev1.EnvoyConfig) bool {
		return !strings.Contains(condition(c, examplev1.EnvoyConfigConditionDegraded).Message, "web-tls")
	})
	if d := condition(got, examplev1.EnvoyConfigConditionDegraded); d.Reason != examplev1.EnvoyConfigReasonSecretUnavailable || !strings.Contains(d.Message, `"opaque"`) {
		t.Errorf("Degraded = %+v", d)
	}

	// A Secret deleted is served no more.
	if err := suite.Client.Delete(ctx, unlabelled); err != nil {
		t.Fatal(err)
	}
	degraded(`Secret "web-tls" does not exist`)
	testenv.Eventually(t, "the secret to be served no more", func() (bool, error) {
		return len(xdsServer.Resources(fleetID)[resourcev3.SecretType]) == 0, nil
	})
}
