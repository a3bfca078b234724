package endpoint

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

var (
	env   *envtest.Environment
	admin *kubernetes.Clientset
	// histories reads the fleets' histories, as the manager's client does.
	histories client.Client
)

// operatorNamespace holds the fleets' histories.
const operatorNamespace = "kube-envoy-controller"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = testenv.New(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	admin = kubernetes.NewForConfigOrDie(cfg)
	if histories, err = client.New(cfg, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// debugServer is a replica: an xDS server, plaintext (its transport is not
// what is tested here), with its debug endpoint on loopback.
type debugServer struct {
	xds    *server.Server
	url    string
	caPool *tls.Config // trusts the debug endpoint's CA
}

func startServer(t *testing.T) *debugServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := zap.New(zap.UseDevMode(true))
	x := server.New("127.0.0.1:0", log)
	go func() { _ = x.Start(ctx) }()

	now := time.Now()
	a, _, err := pki.Rotate(pki.Authority{}, now, pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.IssueServer(a, []string{"localhost", "127.0.0.1"}, now, pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{
		BindAddress: "127.0.0.1:0", Replica: "replica-a", Config: env.Config, Source: x, Log: log,
		Histories: histories, Namespace: operatorNamespace,
		Certificate: func(context.Context) (*tls.Certificate, error) { return &cert, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := srv.Start(ctx); err != nil {
			t.Errorf("the debug server: %v", err)
		}
	}()
	addr, err := srv.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &debugServer{xds: x, url: "https://" + addr.String(), caPool: &tls.Config{RootCAs: a.Pool(), ServerName: "localhost"}}
}

// get asks the endpoint as someone: a bearer token, or a client
// certificate in cfg, or nobody.
func (d *debugServer) get(t *testing.T, path, token string, clientCert *rest.Config) (int, []byte) {
	t.Helper()
	tc := d.caPool.Clone()
	if clientCert != nil {
		pair, err := tls.X509KeyPair(clientCert.CertData, clientCert.KeyData)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: time.Minute}
	req, _ := http.NewRequest(http.MethodGet, d.url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func namespace(t *testing.T, name string) {
	t.Helper()
	_, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// allow grants subject get on resources (of example.com) in ns.
func allow(t *testing.T, ns string, subject rbacv1.Subject, resources ...string) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("%s-%s-%s", strings.ToLower(subject.Kind), subject.Name, strings.Join(resources, "-"))
	_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: resources, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// serviceAccount creates a ServiceAccount and returns a token for it.
func serviceAccount(t *testing.T, ns, name string) (string, rbacv1.Subject) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token, rbacv1.Subject{Kind: "ServiceAccount", Name: name, Namespace: ns}
}

// serveFleet serves fleet a cluster and a secret with a private key, and
// connects a proxy that accepts both.
func serveFleet(t *testing.T, d *debugServer, fleet, node string) {
	t.Helper()
	ctx := context.Background()
	err := d.xds.SetFleet(ctx, fleet, "v1", map[string][]types.Resource{
		resourcev3.ClusterType: {&clusterv3.Cluster{Name: "backend", ConnectTimeout: durationpb.New(time.Second)}},
		resourcev3.SecretType: {&tlsv3.Secret{Name: "server-cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "PUBLIC-CHAIN"}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "PRIVATE-KEY-OF-" + fleet}},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := d.xds.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := xdstest.Connect(t, xdstest.Dial(t, addr.String()), fleet, node, resourcev3.ClusterType)
	if _, err := p.Next(""); err != nil {
		t.Fatal(err)
	}
}

func proxiesOf(t *testing.T, body []byte) []string {
	t.Helper()
	var l debug.ProxyList
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var out []string
	for _, p := range l.Proxies {
		out = append(out, fmt.Sprintf("%s %s %s %s", p.Fleet, p.Node, p.Replica, p.State))
	}
	slices.Sort(out)
	return out
}

// The endpoint answers nobody it cannot authenticate, and shows each user
// only the fleets of the namespaces where RBAC lets them get Envoys (the
// proxies) or EnvoyConfigs (the configuration), whether they authenticate
// with a ServiceAccount token or a client certificate of the cluster's CA.
func TestAuthenticationAndAuthorization(t *testing.T) {
	d := startServer(t)
	namespace(t, "team-a")
	namespace(t, "team-b")
	serveFleet(t, d, "team-a/edge", "edge-a-1")
	serveFleet(t, d, "team-b/edge", "edge-b-1")

	viewerToken, viewer := serviceAccount(t, "team-a", "viewer")
	allow(t, "team-a", viewer, "envoys")
	dumperToken, dumper := serviceAccount(t, "team-a", "dumper")
	allow(t, "team-a", dumper, "envoys", "envoyconfigs")
	nobodyToken, _ := serviceAccount(t, "team-a", "nobody")
	certUser, err := env.AddUser(envtest.User{Name: "carol"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	allow(t, "team-b", rbacv1.Subject{Kind: "User", Name: "carol", APIGroup: "rbac.authorization.k8s.io"}, "envoys")

	t.Run("anonymous and unknown clients get 401", func(t *testing.T) {
		for _, path := range []string{debug.VersionPath, debug.ProxiesPath, debug.ConfigPath + "?fleet=team-a/edge"} {
			if code, body := d.get(t, path, "", nil); code != http.StatusUnauthorized {
				t.Errorf("anonymous %s: %d %s", path, code, body)
			}
			if code, body := d.get(t, path, "not-a-token", nil); code != http.StatusUnauthorized {
				t.Errorf("a made-up token, %s: %d %s", path, code, body)
			}
		}
	})
	t.Run("version needs authentication only", func(t *testing.T) {
		code, body := d.get(t, debug.VersionPath, nobodyToken, nil)
		var v debug.VersionInfo
		if code != http.StatusOK || json.Unmarshal(body, &v) != nil || v.Replica != "replica-a" || v.Version == "" {
			t.Errorf("version: %d %s", code, body)
		}
	})
	t.Run("every namespace: only the readable fleets' rows", func(t *testing.T) {
		code, body := d.get(t, debug.ProxiesPath, viewerToken, nil)
		if want := []string{"team-a/edge edge-a-1 replica-a SYNCED"}; code != http.StatusOK || !slices.Equal(proxiesOf(t, body), want) {
			t.Errorf("viewer: %d %s, want %q", code, body, want)
		}
		// The cluster's client CA is read from its ConfigMap once the
		// server's informer has it.
		testenv.Eventually(t, "the client CA to be loaded", func() (bool, error) {
			code, _ = d.get(t, debug.ProxiesPath, "", certUser.Config())
			return code != http.StatusUnauthorized, nil
		})
		code, body = d.get(t, debug.ProxiesPath, "", certUser.Config())
		if want := []string{"team-b/edge edge-b-1 replica-a SYNCED"}; code != http.StatusOK || !slices.Equal(proxiesOf(t, body), want) {
			t.Errorf("carol, by certificate: %d %s, want %q", code, body, want)
		}
		code, body = d.get(t, debug.ProxiesPath, nobodyToken, nil)
		if code != http.StatusOK || len(proxiesOf(t, body)) != 0 {
			t.Errorf("nobody: %d %s, want no rows", code, body)
		}
	})
	t.Run("a namespace", func(t *testing.T) {
		if code, body := d.get(t, debug.ProxiesPath+"?namespace=team-b", viewerToken, nil); code != http.StatusForbidden {
			t.Errorf("viewer, team-b: %d %s, want 403", code, body)
		}
		code, body := d.get(t, debug.ProxiesPath+"?namespace=team-a", viewerToken, nil)
		if want := []string{"team-a/edge edge-a-1 replica-a SYNCED"}; code != http.StatusOK || !slices.Equal(proxiesOf(t, body), want) {
			t.Errorf("viewer, team-a: %d %s, want %q", code, body, want)
		}
	})
	t.Run("a named fleet", func(t *testing.T) {
		if code, body := d.get(t, debug.ProxiesPath+"?namespace=team-b&fleet=edge", viewerToken, nil); code != http.StatusForbidden {
			t.Errorf("viewer, team-b's fleet: %d %s, want 403", code, body)
		}
		code, body := d.get(t, debug.ProxiesPath+"?namespace=team-a&fleet=edge", viewerToken, nil)
		if want := []string{"team-a/edge edge-a-1 replica-a SYNCED"}; code != http.StatusOK || !slices.Equal(proxiesOf(t, body), want) {
			t.Errorf("viewer, team-a's fleet: %d %s, want %q", code, body, want)
		}
	})
	t.Run("config dump", func(t *testing.T) {
		if code, body := d.get(t, debug.ConfigPath+"?fleet=team-a/edge", viewerToken, nil); code != http.StatusForbidden {
			t.Errorf("viewer, who may not get EnvoyConfigs: %d %s, want 403", code, body)
		}
		if code, body := d.get(t, debug.ConfigPath+"?fleet=team-b/edge", dumperToken, nil); code != http.StatusForbidden {
			t.Errorf("dumper, team-b's fleet: %d %s, want 403", code, body)
		}
		code, body := d.get(t, debug.ConfigPath+"?fleet=team-a/edge", dumperToken, nil)
		var dump debug.ConfigDump
		if code != http.StatusOK || json.Unmarshal(body, &dump) != nil {
			t.Fatalf("dumper, team-a's fleet: %d %s", code, body)
		}
		got := string(body)
		if len(dump.Resources["clusters"]) != 1 || len(dump.Resources["secrets"]) != 1 || !strings.Contains(got, translate.Redacted) ||
			!strings.Contains(got, "PUBLIC-CHAIN") || strings.Contains(got, "PRIVATE-KEY") {
			t.Errorf("the dump: %s", got)
		}
		if code, body := d.get(t, debug.ConfigPath+"?fleet=team-a/edge&type=routers", dumperToken, nil); code != http.StatusBadRequest {
			t.Errorf("an unknown type: %d %s, want 400", code, body)
		}
	})
}

// record writes h as fleet id's history, as the leader does.
func record(t *testing.T, id fleet.ID, h publish.History) *corev1.ConfigMap {
	t.Helper()
	cm, err := history.ConfigMap(operatorNamespace, id, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := histories.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// keyListener terminates TLS with a private key inline, as an EnvoyConfig
// created before admission refused secret material inline may; it is served
// all the same.
const keyListener = `{"name": "https", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8443}}, "filter_chains": [{
  "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
    "common_tls_context": {"tls_certificates": [{"certificate_chain": {"inline_string": "PUBLIC-CHAIN"}, "private_key": {"inline_string": "PRIVATE-KEY"}}]}}},
  "filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "backend"}}]}]}`

const backendCluster = `{"name": "backend", "type": "STATIC", "connect_timeout": "1s"}`

// configWith is EnvoyConfig ns/name of fleet edge with these listeners and
// clusters.
func configWith(ns, name string, listeners, clusters []string) translate.Config {
	raw := func(docs []string) []runtime.RawExtension {
		var out []runtime.RawExtension
		for _, d := range docs {
			out = append(out, runtime.RawExtension{Raw: []byte(d)})
		}
		return out
	}
	return translate.Config{Name: ns + "/" + name, Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge",
		Resources: examplev1.EnvoyResources{Listeners: raw(listeners), Clusters: raw(clusters)}}}
}

// recorded is the history the leader records for configs, over prev.
func recorded(prev publish.History, configs ...translate.Config) publish.History {
	ir := translate.Translate(translate.Input{Configs: configs})
	return publish.Decide(prev, ir, publish.Acks{}, nil).History
}

// A fleet's recorded history is shown to whoever may get the EnvoyConfigs
// of its namespace, as what it is served is (config), and to nobody else:
// not to a user of another namespace, nor to one who may get only its
// Envoys. What is shown holds no secret material.
func TestHistory(t *testing.T) {
	d := startServer(t)
	namespace(t, "team-c")
	namespace(t, "team-d")
	mine := fleet.ID{Namespace: "team-c", Name: "edge"}
	h := recorded(publish.History{}, configWith("team-c", "backend", nil, []string{backendCluster}), configWith("team-c", "tls", []string{keyListener}, nil))
	record(t, mine, h)
	theirs := fleet.ID{Namespace: "team-d", Name: "edge"}
	record(t, theirs, recorded(publish.History{}, configWith("team-d", "backend", nil, []string{`{"name": "team-d-backend", "type": "STATIC", "connect_timeout": "1s"}`})))
	tampered := record(t, fleet.ID{Namespace: "team-c", Name: "tampered"}, h)
	tampered.BinaryData = map[string][]byte{"history.json.gz": []byte("not gzip")}
	if err := histories.Update(context.Background(), tampered); err != nil {
		t.Fatal(err)
	}

	dumperToken, dumper := serviceAccount(t, "team-c", "dumper")
	allow(t, "team-c", dumper, "envoyconfigs")
	viewerToken, viewer := serviceAccount(t, "team-c", "viewer")
	allow(t, "team-c", viewer, "envoys")

	code, body := d.get(t, debug.HistoryPath+"?fleet=team-c/edge", dumperToken, nil)
	var got debug.RecordedHistory
	if code != http.StatusOK || json.Unmarshal(body, &got) != nil {
		t.Fatalf("dumper, team-c's fleet: %d %s", code, body)
	}
	if !got.Recorded || got.Fleet != "team-c/edge" || got.Replica != "replica-a" || got.History.Current != h.Current ||
		len(got.History.Served().Configs) != 2 || translate.VersionOf(h.Served().Configs) != h.Current {
		t.Errorf("dumper, team-c's fleet: %s", body)
	}
	if strings.Contains(string(body), "PRIVATE-KEY") || !strings.Contains(string(body), translate.Redacted) {
		t.Errorf("the secret material of the served revision is shown: %s", body)
	}

	for _, tt := range []struct {
		who, token, fleet string
		want              int
	}{
		{"dumper, team-d's fleet", dumperToken, "team-d/edge", http.StatusForbidden},
		{"viewer, who may not get EnvoyConfigs", viewerToken, "team-c/edge", http.StatusForbidden},
		{"anonymous", "", "team-c/edge", http.StatusUnauthorized},
		{"dumper, a malformed fleet", dumperToken, "edge", http.StatusBadRequest},
	} {
		if code, body := d.get(t, debug.HistoryPath+"?fleet="+tt.fleet, tt.token, nil); code != tt.want || strings.Contains(string(body), "team-d-backend") {
			t.Errorf("%s: %d %s, want %d", tt.who, code, body, tt.want)
		}
	}

	code, body = d.get(t, debug.HistoryPath+"?fleet=team-c/never-published", dumperToken, nil)
	if got = (debug.RecordedHistory{}); code != http.StatusOK || json.Unmarshal(body, &got) != nil || got.Recorded || len(got.History.Revisions) != 0 {
		t.Errorf("a fleet with no history: %d %s", code, body)
	}
	code, body = d.get(t, debug.HistoryPath+"?fleet=team-c/tampered", dumperToken, nil)
	if code != http.StatusInternalServerError || !strings.Contains(string(body), "the recorded history of fleet team-c/tampered is not usable: ") {
		t.Errorf("a history that is not usable: %d %s", code, body)
	}
}
