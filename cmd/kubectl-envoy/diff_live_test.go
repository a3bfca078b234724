package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoyconfig"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	debugendpoint "github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug/endpoint"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// The package's tests run against a real API server, with the Gateway
// API's CRDs, and the operator's EnvoyConfig controller (which serves
// Gateways too), its xDS server, its debug endpoint and its validating
// webhook: diff's predictions are checked against what the
// operator then does. The RBAC of kubectl envoy's users is the one shipped
// in config/rbac/debug_client_role.yaml.
var (
	suite       testenv.Suite
	xdsServer   *server.Server
	debugServer *debugendpoint.Server
)

const operatorNamespace = "kube-envoy-controller"

// The roles of config/rbac/debug_client_role.yaml.
const (
	debugClientRole = "kube-envoy-controller-debug-client"
	proxyViewerRole = "kube-envoy-controller-proxy-viewer"
)

func TestMain(m *testing.M) {
	_, validating, err := testenv.WebhookManifests()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	suite.ValidatingWebhooks = validating
	suite.GatewayAPI = true // gateway_live_test.go
	suite.Main(m, func(mgr ctrl.Manager) error {
		c, err := client.New(mgr.GetConfig(), client.Options{})
		if err != nil {
			return err
		}
		if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
			return err
		}
		if xdsServer, err = server.Add(mgr, server.Options{BindAddress: "127.0.0.1:0", Namespace: operatorNamespace, Replica: "replica-a"}); err != nil {
			return err
		}
		r := envoyconfig.NewReconciler(mgr, xdsServer, operatorNamespace)
		r.GatewayAPI = true // a fleet whose Envoy a Gateway controls serves the Gateway
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
		if err := addDebugServer(mgr, c); err != nil {
			return err
		}
		if err := installShippedRBAC(c); err != nil {
			return err
		}
		return webhook.Setup(mgr, webhook.Options{Namespace: operatorNamespace})
	})
}

// addDebugServer adds the debug endpoint to mgr, as the operator's main
// does, with a certificate from a CA of its own that it publishes where the
// operator publishes the xDS CA's certificates.
func addDebugServer(mgr ctrl.Manager, c client.Client) error {
	now := time.Now()
	ca, _, err := pki.Rotate(pki.Authority{}, now, pki.DefaultOptions)
	if err != nil {
		return err
	}
	leaf, err := pki.IssueServer(ca, []string{"localhost"}, now, pki.DefaultOptions)
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		return err
	}
	if err := c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: authority.DefaultConfigMapName, Namespace: operatorNamespace},
		Data: map[string]string{authority.BundleKey: string(ca.Bundle())}}); err != nil {
		return err
	}
	debugServer, err = debugendpoint.New(debugendpoint.Options{
		BindAddress: "127.0.0.1:0", Replica: "replica-a", Config: mgr.GetConfig(), Source: xdsServer, Log: ctrl.Log.WithName("xds-debug"),
		Certificate: func(context.Context) (*tls.Certificate, error) { return &cert, nil },
		Histories:   mgr.GetClient(), Namespace: operatorNamespace,
	})
	if err != nil {
		return err
	}
	return mgr.Add(debugServer)
}

// installShippedRBAC creates the roles of config/rbac/debug_client_role.yaml:
// its Role in the operator's namespace, and its ClusterRole.
func installShippedRBAC(c client.Client) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	content, err := os.ReadFile(filepath.Join(root, "config", "rbac", "debug_client_role.yaml"))
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(content), "\n---\n") {
		var o client.Object
		switch {
		case strings.Contains(doc, "\nkind: Role\n"):
			o = &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace}}
		case strings.Contains(doc, "\nkind: ClusterRole\n"):
			o = &rbacv1.ClusterRole{}
		default:
			return fmt.Errorf("config/rbac/debug_client_role.yaml: a document that is neither a Role nor a ClusterRole")
		}
		if err := yaml.UnmarshalStrict([]byte(doc), o); err != nil {
			return fmt.Errorf("config/rbac/debug_client_role.yaml: %w", err)
		}
		if err := c.Create(context.Background(), o); err != nil {
			return err
		}
	}
	return nil
}

// operatorAddress is the debug endpoint's address, for --operator-address.
func operatorAddress(t *testing.T) string {
	t.Helper()
	addr, err := debugServer.Addr(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return addr.String()
}

// user is a ServiceAccount of ns allowed rules in ns, and a kubeconfig
// that authenticates as it, with ns as its context's namespace.
func user(t *testing.T, ns, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(suite.Manager.GetConfig())
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(rules) > 0 {
		if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := suite.Manager.GetConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: name, Namespace: ns}
	kc.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// tenant is user name of ns with what docs/tasks/previewing-changes.md says diff needs, and
// nothing in any other namespace: in ns, the ClusterRole
// kube-envoy-controller-proxy-viewer (get and list EnvoyConfigs), list
// EndpointSlices and get Secrets; in the operator's namespace, the Role
// kube-envoy-controller-debug-client, to reach the debug endpoint.
func tenant(t *testing.T, ns, name string) string {
	t.Helper()
	kubeconfig := user(t, ns, name, rule("discovery.k8s.io", "endpointslices", "list"), rule("", "secrets", "get"))
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
	for _, b := range []*rbacv1.RoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: name + "-viewer", Namespace: ns}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: proxyViewerRole}},
		{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name, Namespace: operatorNamespace}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: debugClientRole}},
	} {
		if err := suite.Client.Create(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return kubeconfig
}

// optionsFor are the plugin's options with kubeconfig, and the debug
// endpoint at addresses; what the plugin writes on stderr goes to the
// buffer.
func optionsFor(kubeconfig string, addresses ...string) (*options, *bytes.Buffer) {
	var stderr bytes.Buffer
	o := &options{config: genericclioptions.NewConfigFlags(true), operatorNamespace: operatorNamespace, operatorAddresses: addresses,
		timeout: time.Minute, streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: &stderr}}
	o.config.KubeConfig = &kubeconfig
	return o, &stderr
}

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

// apply creates or updates the EnvoyConfigs of content in ns through the
// API server, and its webhook, as kubectl apply would store them.
func apply(t *testing.T, ns, content string) error {
	t.Helper()
	ctx := context.Background()
	for _, doc := range strings.Split(content, "\n---\n") {
		c := &examplev1.EnvoyConfig{}
		if err := yaml.UnmarshalStrict([]byte(doc), c); err != nil {
			t.Fatal(err)
		}
		c.Namespace = ns
		// As kubectl apply does, whatever the operator wrote meanwhile (its
		// status, which moves the resourceVersion): an update that lost a
		// race with it is sent again on the object as it now is.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live := &examplev1.EnvoyConfig{}
			err := suite.Client.Get(ctx, client.ObjectKeyFromObject(c), live)
			switch {
			case err == nil:
				live.Spec = c.Spec
				return suite.Client.Update(ctx, live)
			case client.IgnoreNotFound(err) == nil:
				return suite.Client.Create(ctx, c)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// served waits until the operator serves fleet version, and returns what
// it serves.
func served(t *testing.T, fleetID, version string) map[string][]types.Resource {
	t.Helper()
	testenv.Eventually(t, "version "+version+" of "+fleetID, func() (bool, error) {
		return xdsServer.Version(fleetID) == version, fmt.Errorf("serving %q", xdsServer.Version(fleetID))
	})
	return xdsServer.Resources(fleetID)
}

// sameResources compares two fleets' resources as Envoy's JSON, redacted,
// and returns what differs.
func sameResources(t *testing.T, got, want map[string][]types.Resource) []string {
	t.Helper()
	g, err := debug.Dump("", "", got, "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := debug.Dump("", "", want, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range resource.Kinds {
		if td := diffType(k.Field, named(got[k.TypeURL], g.Resources[k.Field]), named(want[k.TypeURL], w.Resources[k.Field])); td != nil {
			b, _ := json.Marshal(td)
			out = append(out, string(b))
		}
	}
	return out
}

// A fleet with its Service's endpoints and a TLS Secret, live.
func liveFleet(t *testing.T) (ns string, keyPEM []byte) {
	t.Helper()
	ctx := context.Background()
	ns = suite.Namespace(t)
	now := time.Now()
	ca, _, err := pki.Rotate(pki.Authority{}, now, pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.IssueServer(ca, []string{"web.example.com"}, now, pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-tls", Namespace: ns, Labels: map[string]string{names.XDSSecretLabel: names.XDSSecretTLS}},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: leaf.Cert, corev1.TLSPrivateKeyKey: leaf.Key}},
	} {
		if err := suite.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return ns, leaf.Key
}

// backendWithEndpoints is clusterConfig with its cluster's endpoints from
// the Service web.
const backendWithEndpoints = clusterConfig + "  serviceEndpoints:\n  - {cluster: backend, service: web, port: http}\n"

// httpsConfig is listenerConfig on port 8443, terminating TLS with the
// Secret web-tls, over SDS.
var httpsConfig = strings.NewReplacer(
	"name: listener\n", "name: https\n",
	"  envoyRef: edge\n", "  envoyRef: edge\n  tlsSecrets:\n  - {name: web-cert, secretRef: web-tls}\n",
	"- name: http\n", "- name: https\n",
	"port_value: 8080", "port_value: 8443",
	"stat_prefix: http\n", "stat_prefix: https\n",
	"      - filters:\n", `      - transport_socket:
          name: envoy.transport_sockets.tls
          typed_config:
            '@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
            common_tls_context:
              tls_certificate_sds_secret_configs:
              - {name: web-cert, sds_config: {ads: {}, resource_api_version: V3}}
        filters:
`,
).Replace(listenerConfig)

// Against a live fleet, diff reads with the caller's credentials what the
// fleet is served now (its recorded revision, from the operator's debug
// endpoint for a tenant, and its endpoints and secrets), predicts exactly
// what the operator serves once the files are applied, redacts the private
// key it had to read, and refuses what the webhook refuses, in the
// webhook's words.
func TestDiffLive(t *testing.T) {
	ns, key := liveFleet(t)
	fleetID := ns + "/edge"
	if err := apply(t, ns, backendWithEndpoints+"---\n"+routesConfig+"---\n"+listenerConfig); err != nil {
		t.Fatal(err)
	}
	// The three EnvoyConfigs may be published in more than one decision, as
	// the controller's cache sees them: wait for the version that every one
	// of them reports.
	published := &examplev1.EnvoyConfig{}
	testenv.Eventually(t, "the fleet's three EnvoyConfigs to be published in one version", func() (bool, error) {
		var list examplev1.EnvoyConfigList
		if err := suite.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		versions := map[string]bool{}
		for _, c := range list.Items {
			versions[c.Status.PublishedVersion] = true
			if c.Name == "routes" {
				c.DeepCopyInto(published)
			}
		}
		return len(list.Items) == 3 && len(versions) == 1 && !versions[""], fmt.Errorf("published versions %v", versions)
	})
	servedNow := served(t, fleetID, published.Status.PublishedVersion)
	if len(servedNow[resourcev3.EndpointType]) != 1 || len(servedNow[resourcev3.SecretType]) != 0 {
		t.Fatalf("the fleet's endpoints are not served: %v", servedNow)
	}

	reader := tenant(t, ns, "reader")
	operator := operatorAddress(t)
	files := writeFiles(t, map[string]string{
		"a.yaml": strings.Replace(routesConfig, "route: {cluster: backend}", "route: {cluster: backend, timeout: 5s}", 1),
		"b.yaml": httpsConfig,
	})

	t.Run("what it prints, and its exit code", func(t *testing.T) {
		code, stdout, stderr := runPlugin(t, "", "diff", "--kubeconfig", reader, "--operator-address", operator, "-f", files)
		if code != exitChanges || stderr != "" {
			t.Fatalf("exit %d, stderr %q, want %d and nothing:\n%s", code, stderr, exitChanges, stdout)
		}
		for _, want := range []string{
			fmt.Sprintf("fleet %s: version %s -> ", fleetID, published.Status.PublishedVersion[:versionWidth]),
			"  listeners: 1 added\n    + https\n",
			"  routes: 1 changed\n    ~ routes\n        + virtual_hosts[name=all].routes[0].route.timeout: \"5s\"\n",
			"  secrets: 1 added\n    + web-cert\n",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("the output lacks %q:\n%s", want, stdout)
			}
		}
		if redacted := regexp.MustCompile(`"private_key": \{\s*"inline_string": "` + regexp.QuoteMeta(translate.Redacted) + `"`); !redacted.MatchString(stdout) {
			t.Errorf("the output shows no redacted private key:\n%s", stdout)
		}
		// protojson shows bytes in base64.
		for _, secret := range []string{string(key), base64.StdEncoding.EncodeToString(key)} {
			if strings.Contains(stdout, secret) {
				t.Errorf("the output shows the private key:\n%s", stdout)
			}
		}
		if strings.Contains(stdout, "endpoints") || strings.Contains(stdout, "clusters") {
			t.Errorf("what does not change is shown:\n%s", stdout)
		}
	})

	t.Run("what it predicts is what the operator serves", func(t *testing.T) {
		// The tenant may not read the fleet's history where the operator
		// keeps it: diff reads it from the operator's debug endpoint.
		cfg, err := clientcmd.BuildConfigFromFlags("", reader)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(operatorNamespace).Get(context.Background(),
			history.Name(fleet.ID{Namespace: ns, Name: "edge"}), metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("the tenant reads the fleet's history in the operator's namespace: %v", err)
		}
		docs, err := readManifests([]string{files}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := decodeConfigs(docs, ns)
		o, stderr := optionsFor(reader, operator)
		w, warnings, err := o.readWorld(context.Background(), d.configs)
		if err != nil || len(warnings) > 0 || stderr.Len() > 0 {
			t.Fatal(err, warnings, stderr)
		}
		r := plan(w, changesOf(w, d.configs, false), time.Now())
		if len(r.Fleets) != 1 || len(r.Refused) > 0 {
			t.Fatalf("%+v", r)
		}
		f := r.Fleets[0]
		if diff := sameResources(t, f.now, servedNow); len(diff) > 0 {
			t.Errorf("what it says is served now is not what is served: %v", diff)
		}
		if err := apply(t, ns, strings.Replace(routesConfig, "route: {cluster: backend}", "route: {cluster: backend, timeout: 5s}", 1)+"---\n"+httpsConfig); err != nil {
			t.Fatal(err)
		}
		if diff := sameResources(t, f.next, served(t, fleetID, f.NewVersion)); len(diff) > 0 {
			t.Errorf("what it says would be served is not what is served: %v", diff)
		}
		code, stdout, stderrOut := runPlugin(t, "", "diff", "--kubeconfig", reader, "--operator-address", operator, "-f", files)
		if want := fmt.Sprintf("fleet %s: version %s -> %[2]s\n  no change to what its proxies are served\n", fleetID, f.NewVersion[:versionWidth]); code != 0 || stdout != want {
			t.Errorf("once applied: exit %d, %q, want 0 and %q; stderr %q", code, stdout, want, stderrOut)
		}
	})

	t.Run("an admin reads the history where the operator keeps it, without the operator", func(t *testing.T) {
		docs, err := readManifests([]string{files}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := decodeConfigs(docs, ns)
		o, stderr := optionsFor(adminKubeconfig(t), "127.0.0.1:1") // nothing answers there
		w, warnings, err := o.readWorld(context.Background(), d.configs)
		if err != nil || len(warnings) > 0 || stderr.Len() > 0 {
			t.Fatal(err, warnings, stderr)
		}
		tenants, _ := optionsFor(reader, operator)
		via, _, err := tenants.readWorld(context.Background(), d.configs)
		if err != nil {
			t.Fatal(err)
		}
		id := fleet.ID{Namespace: ns, Name: "edge"}
		if got, want := w.histories[id], via.histories[id]; got.Current != xdsServer.Version(fleetID) || !reflect.DeepEqual(versionsOf(got), versionsOf(want)) {
			t.Errorf("the admin reads %+v, the tenant %+v; the operator serves %s", got, want, xdsServer.Version(fleetID))
		}
	})

	t.Run("as another user, the history is read where the operator keeps it, or assumed", func(t *testing.T) {
		// The debug endpoint answers the caller, not whom the caller
		// acts as: diff does not ask it for anyone else.
		code, stdout, stderr := runPlugin(t, "", "diff", "--kubeconfig", adminKubeconfig(t), "--as", "system:serviceaccount:"+ns+":reader",
			"--operator-address", operator, "-n", ns, "-f", files)
		if want := "warning: fleet " + fleetID + ": its recorded revision is readable neither in namespace " + operatorNamespace +
			" nor from the operator's debug endpoint (--as, --as-group, --as-uid and --as-user-extra are not supported: the operator's debug endpoint does not impersonate): " + assumed + "\n"; code == exitError || stderr != want {
			t.Errorf("exit %d, stderr %q, want %q:\n%s", code, stderr, want, stdout)
		}
	})

	t.Run("admission's refusal, in the webhook's words", func(t *testing.T) {
		broken := strings.NewReplacer("name: routes", "name: broken", "route: {cluster: backend}", "route: {cluster: nowhere}").Replace(routesConfig)
		code, stdout, stderr := runPlugin(t, "", "diff", "--kubeconfig", reader, "--operator-address", operator, "-f", writeFiles(t, map[string]string{"c.yaml": broken}))
		err := apply(t, ns, broken)
		if err == nil {
			t.Fatal("the API server took the broken EnvoyConfig")
		}
		_, message, _ := strings.Cut(stdout, "(document 1): ")
		message = strings.TrimSuffix(message, "\n")
		if code != exitRefused || !strings.HasPrefix(message, "EnvoyConfig broken is invalid: ") || !strings.HasSuffix(err.Error(), "denied the request: "+message) {
			t.Errorf("exit %d, %q; the webhook: %v; stderr %q", code, stdout, err, stderr)
		}
	})

	t.Run("a caller who may not list EnvoyConfigs gets an error", func(t *testing.T) {
		stranger := user(t, ns, "stranger", rule("", "configmaps", "get"))
		code, stdout, stderr := runPlugin(t, "", "diff", "--kubeconfig", stranger, "--operator-address", operator, "-f", files)
		if code != exitError || stdout != "" || !strings.Contains(stderr, "listing the EnvoyConfigs of namespace "+ns+": ") || !strings.Contains(stderr, "forbidden") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})

	t.Run("what a caller may not read is left out, with a warning", func(t *testing.T) {
		// The https listener is live, whatever the subtests before did.
		if err := apply(t, ns, httpsConfig); err != nil {
			t.Fatal(err)
		}
		// The viewer may not reach the operator's debug endpoint (no
		// kube-envoy-controller-debug-client): the fleet's served revision
		// is assumed.
		viewer := user(t, ns, "viewer", rule("example.com", "envoyconfigs", "list"), rule("discovery.k8s.io", "endpointslices", "list"))
		changed := writeFiles(t, map[string]string{"a.yaml": strings.Replace(httpsConfig, "port_value: 8443", "port_value: 9443", 1)})
		code, stdout, stderr := runPlugin(t, "", "diff", "--kubeconfig", viewer, "--operator-address", operator, "-f", changed)
		for _, want := range []string{
			"warning: fleet " + fleetID + ": its recorded revision is readable neither in namespace " + operatorNamespace + " nor from the operator's debug endpoint (",
			"): " + assumed + "\n",
			"warning: the secrets that Secret " + ns + "/web-tls serves are left out: ",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q: %s", want, stderr)
			}
		}
		if want := "  listeners: 1 changed\n    ~ https\n        ~ address.socket_address.port_value: 8443 -> 9443\n"; code != exitChanges || !strings.HasSuffix(stdout, want) {
			t.Errorf("exit %d, %q, want %d and %q", code, stdout, exitChanges, want)
		}
	})
}

// versionsOf is what a history records of its revisions but their content.
func versionsOf(h publish.History) []publish.Revision {
	out := make([]publish.Revision, len(h.Revisions))
	for i, r := range h.Revisions {
		out[i] = publish.Revision{Version: r.Version, Acked: r.Acked, Rejected: r.Rejected}
	}
	return out
}

// adminKubeconfig is a kubeconfig of the suite's administrator.
func adminKubeconfig(t *testing.T) string {
	t.Helper()
	cfg := suite.Manager.GetConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "admin"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// What a fleet is served now is its recorded revision, even when that is
// not its EnvoyConfigs: after every proxy rejected their content, the
// operator serves the version they accepted before, and so does diff, read
// by a tenant from the operator's debug endpoint. A tenant reads no other
// namespace's fleet through that endpoint.
func TestDiffServedNowIsTheRecordedRevision(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	fleetID := ns + "/edge"
	if err := apply(t, ns, clusterConfig); err != nil {
		t.Fatal(err)
	}
	addr, err := xdsServer.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy := xdstest.Connect(t, xdstest.Dial(t, addr.String()), fleetID, "pod-1", resourcev3.ClusterType)
	for names := []string(nil); len(names) == 0; {
		if _, names, err = proxy.NextNames(""); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &examplev1.EnvoyConfig{}
	testenv.Eventually(t, "the proxy's ACK to be counted", func() (bool, error) {
		err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cluster"}, cfg)
		return err == nil && cfg.Status.Proxies.Acked == 1, err
	})
	accepted := cfg.Status.PublishedVersion
	withExtra := clusterConfig + "    - {name: extra, type: STATIC, connect_timeout: 1s}\n"
	if err := apply(t, ns, withExtra); err != nil {
		t.Fatal(err)
	}
	if _, names, err := proxy.NextNames("cluster extra: unsupported here"); err != nil || len(names) != 2 {
		t.Fatalf("the new version: %v %v", names, err)
	}
	testenv.Eventually(t, "the rollback", func() (bool, error) {
		err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cluster"}, cfg)
		return err == nil && cfg.Status.PublishedVersion == accepted && len(cfg.Status.RejectedVersions) == 1, err
	})
	servedNow := served(t, fleetID, accepted)
	if len(servedNow[resourcev3.ClusterType]) != 1 {
		t.Fatalf("after the rollback the fleet is served %v", servedNow)
	}

	tenantOf := tenant(t, ns, "tenant")
	operator := operatorAddress(t)

	t.Run("the rejected content as it is: no change, and why", func(t *testing.T) {
		code, stdout, stderr := runPlugin(t, "", "diff", "--kubeconfig", tenantOf, "--operator-address", operator, "-f", writeFiles(t, map[string]string{"a.yaml": withExtra}))
		want := fmt.Sprintf("fleet %s: version %s -> %[2]s\n  no change to what its proxies are served\n  note: version %s was rejected by every proxy (",
			fleetID, accepted[:versionWidth], cfg.Status.RejectedVersions[0])
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, want) {
			t.Errorf("exit %d, %q, want 0 and %q...; stderr %q", code, stdout, want, stderr)
		}
	})

	t.Run("a change is shown against the revision served, and is what the operator then serves", func(t *testing.T) {
		slower := strings.Replace(clusterConfig, "connect_timeout: 1s", "connect_timeout: 3s", 1)
		files := writeFiles(t, map[string]string{"a.yaml": slower})
		code, stdout, stderr := runPlugin(t, "", "diff", "--kubeconfig", tenantOf, "--operator-address", operator, "-f", files)
		want := "  clusters: 1 changed\n    ~ backend\n        ~ connect_timeout: \"1s\" -> \"3s\"\n"
		if code != exitChanges || stderr != "" || !strings.HasPrefix(stdout, fmt.Sprintf("fleet %s: version %s -> ", fleetID, accepted[:versionWidth])) || !strings.HasSuffix(stdout, want) {
			t.Errorf("exit %d, %q, want %d and %q; stderr %q", code, stdout, exitChanges, want, stderr)
		}
		docs, err := readManifests([]string{files}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := decodeConfigs(docs, ns)
		o, _ := optionsFor(tenantOf, operator)
		w, warnings, err := o.readWorld(ctx, d.configs)
		if err != nil || len(warnings) > 0 {
			t.Fatal(err, warnings)
		}
		r := plan(w, changesOf(w, d.configs, false), time.Now())
		f := r.Fleets[0]
		if diff := sameResources(t, f.now, servedNow); len(diff) > 0 {
			t.Errorf("what it says is served now is not what is served: %v", diff)
		}
		if err := apply(t, ns, slower); err != nil {
			t.Fatal(err)
		}
		if diff := sameResources(t, f.next, served(t, fleetID, f.NewVersion)); len(diff) > 0 {
			t.Errorf("what it says would be served is not what is served: %v", diff)
		}
	})

	t.Run("a tenant reads no other namespace's fleet through the operator", func(t *testing.T) {
		other := suite.Namespace(t)
		if err := apply(t, other, clusterConfig); err != nil {
			t.Fatal(err)
		}
		theirs := fleet.ID{Namespace: other, Name: "edge"}
		testenv.Eventually(t, "the other fleet to be published", func() (bool, error) {
			return xdsServer.Version(theirs.String()) != "", nil
		})
		o, _ := optionsFor(tenantOf, operator)
		conns, err := o.connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer closeAll(conns)
		rh, err := historyFrom(ctx, conns, theirs)
		var refused *statusError
		if !errors.As(err, &refused) || refused.code != http.StatusForbidden || rh.Recorded || len(rh.History.Revisions) > 0 {
			t.Errorf("the tenant of %s asked for the history of %s: %+v, %v", ns, theirs, rh, err)
		}
		w := world{configs: map[string]translate.Config{}, histories: map[fleet.ID]publish.History{}}
		warnings := o.operatorHistories(ctx, w, []fleet.ID{theirs})
		if h := w.histories[theirs]; len(warnings) != 1 || !strings.Contains(warnings[0], "forbidden: ") || h.Current == xdsServer.Version(theirs.String()) {
			t.Errorf("diff of the tenant of %s reads fleet %s: %+v, %q", ns, theirs, h, warnings)
		}
	})
}
