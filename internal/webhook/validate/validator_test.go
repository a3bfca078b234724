package validate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionreview "k8s.io/api/admission/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

func rawList(items ...string) []runtime.RawExtension {
	out := make([]runtime.RawExtension, len(items))
	for i, s := range items {
		out[i] = runtime.RawExtension{Raw: []byte(s)}
	}
	return out
}

const (
	edsCluster = `{"name": "backend", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}}}`
	toBackend  = `{"name": "local", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "backend"}}]}]}`
)

func envoyConfig(ns, name string, res examplev1.EnvoyResources) *examplev1.EnvoyConfig {
	return &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: res}}
}

// kubectl apply of an invalid EnvoyConfig is refused by the validating
// webhook, with a message that names the resource and the field.
func TestEnvoyConfigAdmission(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	tests := []struct {
		name string
		res  examplev1.EnvoyResources
		want []string
	}{
		{"unknown-field", examplev1.EnvoyResources{Clusters: rawList(`{"name": "c", "conect_timeout": "1s"}`)},
			[]string{"spec.resources.clusters[0]", `unknown field "conect_timeout"`}},
		{"invalid-value", examplev1.EnvoyResources{Clusters: rawList(`{"name": "c", "connect_timeout": "-1s"}`)},
			[]string{`spec.resources.clusters[0] ("c")`, "ConnectTimeout"}},
		{"inside-typed-config", examplev1.EnvoyResources{Listeners: rawList(`{"name": "l", "filter_chains": [{"filters": [{"name": "hcm", "typed_config":
			{"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
			 "rds": {"route_config_name": "r", "config_source": {"ads": {}}}}}]}]}`)},
			[]string{`spec.resources.listeners[0] ("l")`, "StatPrefix"}},
		{"dangling-reference", examplev1.EnvoyResources{Routes: rawList(toBackend)},
			[]string{`spec.resources.routes[0] ("local")`, `cluster "backend" does not exist`}},
		{"inline-private-key", examplev1.EnvoyResources{Secrets: rawList(inlineKeySecret)},
			[]string{`spec.resources.secrets[0] ("server-cert")`, "tls_certificate.private_key.inline_string", "spec.tlsSecrets"}},
		{"inline-key-in-a-listener", examplev1.EnvoyResources{Listeners: rawList(tlsListener(`"tls_certificates": [{"certificate_chain": {"filename": "/c"}, "private_key": {"inline_bytes": "aw=="}}]`)),
			Clusters: rawList(edsCluster)},
			[]string{`spec.resources.listeners[0] ("https")`, "tls_certificates[0].private_key.inline_bytes", "spec.tlsSecrets"}},
		{"sds-secret-nobody-declares", examplev1.EnvoyResources{Listeners: rawList(tlsListener(sdsServerCert)), Clusters: rawList(edsCluster)},
			[]string{`spec.resources.listeners[0] ("https")`, `secret "server-cert" does not exist`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := suite.Client.Create(ctx, envoyConfig(ns, tt.name, tt.res))
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want a denial", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("denial %q does not mention %q", err, w)
				}
			}
		})
	}

	// References may be satisfied by another EnvoyConfig of the fleet.
	if err := suite.Client.Create(ctx, envoyConfig(ns, "clusters", examplev1.EnvoyResources{Clusters: rawList(edsCluster)})); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the cache to see the clusters", func() (bool, error) {
		err := suite.Client.Create(ctx, envoyConfig(ns, "routes", examplev1.EnvoyResources{Routes: rawList(toBackend)}))
		return err == nil, err
	})
	// A change that breaks a valid object is refused too.
	cfg := &examplev1.EnvoyConfig{}
	if err := suite.Client.Get(ctx, clientKey(ns, "clusters"), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Spec.Resources.Clusters = rawList(edsCluster, edsCluster)
	if err := suite.Client.Update(ctx, cfg); err == nil || !strings.Contains(err.Error(), `cluster "backend" is already defined`) {
		t.Errorf("update: got %v, want a denial for the duplicate cluster", err)
	}

	// The fleet is judged as it would be after the change: an update that
	// drops the cluster another EnvoyConfig's route needs is refused, and so
	// is deleting the EnvoyConfig that defines it. Both name what would break.
	waitCached(t, ns, "routes")
	const breaks = `it would break EnvoyConfig ` // + ns/routes
	if err := suite.Client.Get(ctx, clientKey(ns, "clusters"), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Spec.Resources.Clusters = rawList(strings.Replace(edsCluster, `"backend"`, `"other"`, 1))
	err := suite.Client.Update(ctx, cfg)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), breaks+ns+`/routes: spec.resources.routes[0] ("local"): cluster "backend" does not exist`) {
		t.Errorf("update: got %v, want a denial that names the broken route", err)
	}
	err = suite.Client.Delete(ctx, envoyConfig(ns, "clusters", examplev1.EnvoyResources{}))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot be deleted: "+breaks+ns+"/routes") {
		t.Errorf("delete: got %v, want a denial that names the broken route", err)
	}
	// Once nothing needs it, it may go.
	if err := suite.Client.Delete(ctx, envoyConfig(ns, "routes", examplev1.EnvoyResources{})); err != nil {
		t.Fatalf("deleting the routes: %v", err)
	}
	testenv.Eventually(t, "the clusters to be deletable", func() (bool, error) {
		err := suite.Client.Delete(ctx, envoyConfig(ns, "clusters", examplev1.EnvoyResources{}))
		return err == nil, err
	})
}

// waitCached waits until the manager's cache, which the validator reads the
// fleet from, holds EnvoyConfig ns/name: only then do its references count.
func waitCached(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, "EnvoyConfig "+name+" in the manager's cache", func() (bool, error) {
		err := suite.Manager.GetClient().Get(context.Background(), clientKey(ns, name), &examplev1.EnvoyConfig{})
		return err == nil, err
	})
}

// In a namespace being deleted, every EnvoyConfig may go, in any order: the
// namespace controller must not be stuck on references.
func TestEnvoyConfigDeleteInTerminatingNamespace(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	if err := suite.Client.Create(ctx, envoyConfig(ns, "clusters", examplev1.EnvoyResources{Clusters: rawList(edsCluster)})); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the routes to be admitted", func() (bool, error) {
		err := suite.Client.Create(ctx, envoyConfig(ns, "routes", examplev1.EnvoyResources{Routes: rawList(toBackend)}))
		return err == nil, err
	})
	waitCached(t, ns, "routes")
	clusters := envoyConfig(ns, "clusters", examplev1.EnvoyResources{})
	if err := suite.Client.Delete(ctx, clusters); !apierrors.IsForbidden(err) {
		t.Fatalf("delete before the namespace goes: got %v, want a denial", err)
	}
	if err := suite.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// The test API server runs no namespace controller: the namespace stays
	// Terminating, and its EnvoyConfigs are deleted here as that controller would.
	if err := suite.Client.Delete(ctx, clusters); err != nil {
		t.Errorf("delete in a terminating namespace: %v", err)
	}
}

const (
	inlineKeySecret = `{"name": "server-cert", "tls_certificate": {"certificate_chain": {"inline_string": "c"}, "private_key": {"inline_string": "k"}}}`
	sdsServerCert   = `"tls_certificate_sds_secret_configs": [{"name": "server-cert", "sds_config": {"ads": {}}}]`
)

// tlsListener is a TLS listener that proxies TCP to the cluster backend,
// with common as its common_tls_context's fields.
func tlsListener(common string) string {
	return `{"name": "https", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8443}}, "filter_chains": [{
  "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
    "common_tls_context": {` + common + `}}},
  "filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "backend"}}]}]}`
}

// A certificate's key comes from a Secret named in spec.tlsSecrets, whose
// name counts for the listeners' SDS references; public material, such as
// a CA certificate, may stay inline.
func TestEnvoyConfigTLSSecretsAdmitted(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	cfg := envoyConfig(ns, "tls", examplev1.EnvoyResources{
		Listeners: rawList(tlsListener(sdsServerCert)),
		Clusters:  rawList(edsCluster),
		Secrets:   rawList(`{"name": "upstream-ca", "validation_context": {"trusted_ca": {"inline_string": "-----BEGIN CERTIFICATE-----"}}}`),
	})
	cfg.Spec.TLSSecrets = []examplev1.TLSSecret{{Name: "server-cert", SecretRef: "web-tls"}}
	if err := suite.Client.Create(ctx, cfg); err != nil {
		t.Fatalf("refused: %v", err)
	}
	// Dropping the entry the listener needs is refused, naming what breaks.
	cfg.Spec.TLSSecrets = nil
	if err := suite.Client.Update(ctx, cfg); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `secret "server-cert" does not exist`) {
		t.Errorf("update: got %v, want a denial for the listener's secret", err)
	}
}

// An EnvoyConfig stored with a private key inline before admission refused
// such keys must be changed to lose it: an update that keeps it is refused,
// naming the field. Once it is being deleted, its finalizers may go.
func TestEnvoyConfigStoredWithInlineKey(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	const before = "test.kube-envoy-controller.io/stored-before-the-check"
	// The object is stored as if before the check: the validator does not
	// see objects with the label meanwhile.
	setObjectSelector := func(sel *metav1.LabelSelector) {
		t.Helper()
		testenv.Eventually(t, "the validator's object selector to be updated", func() (bool, error) {
			vwc := &admissionv1.ValidatingWebhookConfiguration{}
			if err := suite.Client.Get(ctx, types.NamespacedName{Name: Configuration}, vwc); err != nil {
				return false, err
			}
			vwc.Webhooks[0].ObjectSelector = sel
			err := suite.Client.Update(ctx, vwc)
			return err == nil, err
		})
	}
	legacy := func(name string) *examplev1.EnvoyConfig {
		c := envoyConfig(ns, name, examplev1.EnvoyResources{Secrets: rawList(inlineKeySecret)})
		c.Labels = map[string]string{before: "true"}
		c.Finalizers = []string{"test.kube-envoy-controller.io/hold"}
		return c
	}
	setObjectSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: before, Operator: metav1.LabelSelectorOpDoesNotExist}}})
	testenv.Eventually(t, "the legacy EnvoyConfig to be stored", func() (bool, error) {
		err := suite.Client.Create(ctx, legacy("legacy"))
		return err == nil, err
	})
	setObjectSelector(nil)
	testenv.Eventually(t, "the validator to see labelled objects again", func() (bool, error) {
		err := suite.Client.Create(ctx, legacy("probe"))
		return apierrors.IsForbidden(err), err
	})

	cfg := &examplev1.EnvoyConfig{}
	if err := suite.Client.Get(ctx, clientKey(ns, "legacy"), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Annotations = map[string]string{"note": "an edit that keeps the key"}
	err := suite.Client.Update(ctx, cfg)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `spec.resources.secrets[0] ("server-cert"): tls_certificate.private_key.inline_string`) {
		t.Errorf("an update that keeps the inline key: got %v, want a denial naming the field", err)
	}
	// Deleted, it is held by its finalizer; removing the finalizer is let through.
	if err := suite.Client.Delete(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := suite.Client.Get(ctx, clientKey(ns, "legacy"), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Finalizers = nil
	if err := suite.Client.Update(ctx, cfg); err != nil {
		t.Errorf("removing the finalizer of an EnvoyConfig being deleted: %v", err)
	}
}

func clientKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// staleCache is a cache that has not seen any EnvoyConfig yet.
type staleCache struct{ client.Reader }

func (staleCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// kubectl apply of a directory creates EnvoyConfigs one after another,
// faster than the webhook's cache sees them: an EnvoyConfig that names what
// one created a moment ago defines is admitted all the same, since a
// refusal is judged again on the API server's view. What the API server
// does not hold either is refused.
func TestEnvoyConfigAdmittedBeforeTheCacheSeesItsReferences(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	if err := suite.Client.Create(ctx, envoyConfig(ns, "clusters", examplev1.EnvoyResources{Clusters: rawList(edsCluster)})); err != nil {
		t.Fatal(err)
	}
	routes := envoyConfig(ns, "routes", examplev1.EnvoyResources{Routes: rawList(toBackend)})
	routes.TypeMeta = metav1.TypeMeta{APIVersion: examplev1.GroupVersion.String(), Kind: "EnvoyConfig"}
	raw, err := json.Marshal(routes)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionreview.AdmissionRequest{Operation: admissionreview.Create, Object: runtime.RawExtension{Raw: raw}}}
	validator := func(live client.Reader) *EnvoyConfigValidator {
		return &EnvoyConfigValidator{Client: staleCache{suite.Client}, APIReader: live,
			Decoder: admission.NewDecoder(suite.Manager.GetScheme()), Policy: translate.Policy{Namespace: operatorNamespace}}
	}
	if resp := validator(suite.Client).Handle(ctx, req); !resp.Allowed {
		t.Errorf("refused while the cache had not seen EnvoyConfig clusters: %v", resp.Result)
	}
	// The same with no view but the stale cache's: refused, so the first
	// answer is the API server's view's doing.
	if resp := validator(staleCache{suite.Client}).Handle(ctx, req); resp.Allowed || !strings.Contains(resp.Result.Message, `cluster "backend" does not exist`) {
		t.Errorf("judged on the stale cache alone: allowed %v, %v; want the dangling reference refused", resp.Allowed, resp.Result)
	}
}
