package validate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionreview "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// app is a cluster of the application on localhost, which every case
// routes to.
const app = `{"name": "app", "type": "STATIC", "connect_timeout": "1s", "load_assignment": {"cluster_name": "app", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 8080}}}}]}]}}`

// routeTo is a route configuration whose one virtual host holds vhost's
// fields and routes / as route (a RouteAction's fields) with route's fields.
func routeTo(vhost, action, route string) string {
	return `{"name": "local", "virtual_hosts": [{"name": "all", "domains": ["*"]` + vhost + `, "routes": [{"match": {"prefix": "/"}, "route": {` + action + `}` + route + `}]}]}`
}

// envoyFamilies are content that a real Envoy refuses, one of each family
// of fields the rules did not read before Envoy judged at admission, with
// words of Envoy's refusal.
var envoyFamilies = []struct {
	name string
	res  examplev1.EnvoyResources
	// said are words of Envoy's refusal.
	said string
}{
	{"host-header-added", examplev1.EnvoyResources{Clusters: rawList(app),
		Routes: rawList(routeTo(`, "request_headers_to_add": [{"header": {"key": "host", "value": "evil.example.com"}}]`, `"cluster": "app"`, ""))},
		":-prefixed or host headers may not be modified"},
	{"pseudo-header-added", examplev1.EnvoyResources{Clusters: rawList(app),
		Routes: rawList(routeTo("", `"cluster": "app"`, `, "request_headers_to_add": [{"header": {"key": ":path", "value": "/admin"}}]`))},
		":-prefixed or host headers may not be modified"},
	{"cipher-boringssl-lacks", examplev1.EnvoyResources{Clusters: rawList(`{"name": "app", "type": "STATIC", "connect_timeout": "1s",
		"load_assignment": {"cluster_name": "app", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 8443}}}}]}]},
		"transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
		  "common_tls_context": {"tls_params": {"cipher_suites": ["ECDHE-RSA-CHACHA20-POLY1305-OLD"]}}}}}`)},
		"ECDHE-RSA-CHACHA20-POLY1305-OLD"},
	{"partial-wildcard-server-name", examplev1.EnvoyResources{Clusters: rawList(app), Listeners: rawList(`{"name": "tls", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8443}},
		"listener_filters": [{"name": "envoy.filters.listener.tls_inspector", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"}}],
		"filter_chains": [{"filter_chain_match": {"server_names": ["foo*.example.com"]},
		  "filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "app"}}]}]}`)},
		"partial wildcards are not supported"},
	{"grpc-health-check-without-http2", examplev1.EnvoyResources{Clusters: rawList(`{"name": "app", "type": "STATIC", "connect_timeout": "1s",
		"load_assignment": {"cluster_name": "app", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 8080}}}}]}]},
		"health_checks": [{"timeout": "1s", "interval": "10s", "unhealthy_threshold": 2, "healthy_threshold": 2, "grpc_health_check": {}}]}`)},
		"cluster must support HTTP/2 for gRPC healthchecking"},
	{"per-route-config-for-the-router", examplev1.EnvoyResources{Clusters: rawList(app),
		Routes: rawList(routeTo("", `"cluster": "app"`, `, "typed_per_filter_config": {"envoy.filters.http.router": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}`))},
		"router"},
	{"weights-sum-to-zero", examplev1.EnvoyResources{Clusters: rawList(app),
		Routes: rawList(routeTo("", `"weighted_clusters": {"clusters": [{"name": "app", "weight": 0}]}`, ""))},
		"weight"},
}

// Content a real Envoy refuses is refused at kubectl apply, one case of
// each family that the rules did not read, with the EnvoyConfig named and
// Envoy's words. Each case is refused by Envoy itself too, loaded alone
// (the judge the validator uses): where the rules refuse it first, Envoy
// is the second judge.
func TestEnvoyRefusesAtAdmission(t *testing.T) {
	realenvoy.Require(t)
	if err := judge.Unavailable(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	pol := translate.Policy{Namespace: operatorNamespace}
	for _, f := range envoyFamilies {
		t.Run(f.name, func(t *testing.T) {
			res, err := envoyload.FromSpec(f.res)
			if err != nil {
				t.Fatal(err)
			}
			v := judge.Judge(ctx, res)
			if v.Outcome != envoyjudge.Refused || !strings.Contains(v.Message, f.said) {
				t.Errorf("Envoy's own verdict: %+v; want it refused, saying %q", v, f.said)
			}
			cfg := envoyConfig(ns, f.name, f.res)
			rules := translate.Admit(pol, nil, ns+"/"+f.name, ptrTo(translate.FromObject(cfg)))
			t.Logf("the rules alone: %q", rules)

			err = suite.Client.Create(ctx, cfg)
			if !apierrors.IsForbidden(err) {
				t.Fatalf("got %v, want a denial", err)
			}
			if !strings.Contains(err.Error(), "EnvoyConfig "+f.name+" is invalid: ") {
				t.Errorf("denial %q does not name the EnvoyConfig", err)
			}
			t.Logf("kubectl apply: %v", err)
			switch {
			case len(rules) > 0 && !strings.Contains(err.Error(), rules[0]):
				t.Errorf("denial %q does not give the rules' refusal %q", err, rules[0])
			case len(rules) == 0 && !strings.Contains(err.Error(), "Envoy "+envoyVersion()+" refuses to load it: "):
				t.Errorf("denial %q does not say Envoy refused it", err)
			case len(rules) == 0 && !strings.Contains(err.Error(), f.said):
				t.Errorf("denial %q does not give Envoy's words (%q)", err, f.said)
			}
		})
	}
	// The same content, fixed, is admitted: Envoy loads it.
	fine := envoyConfig(ns, "fine", examplev1.EnvoyResources{Clusters: rawList(app),
		Routes: rawList(routeTo(`, "request_headers_to_add": [{"header": {"key": "x-tenant", "value": "a"}}]`, `"weighted_clusters": {"clusters": [{"name": "app", "weight": 1}]}`, ""))})
	if err := suite.Client.Create(ctx, fine); err != nil {
		t.Errorf("content Envoy loads: %v", err)
	}
}

func envoyVersion() string {
	_, v := judge.Envoy()
	return v
}

func ptrTo[T any](v T) *T { return &v }

// createRequest is the admission request of the creation of cfg.
func createRequest(t testing.TB, cfg *examplev1.EnvoyConfig) admission.Request {
	t.Helper()
	cfg.TypeMeta = metav1.TypeMeta{APIVersion: examplev1.GroupVersion.String(), Kind: "EnvoyConfig"}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionreview.AdmissionRequest{Operation: admissionreview.Create, Object: runtime.RawExtension{Raw: raw}}}
}

// Without an Envoy, what the rules admit is admitted, with a warning that
// it was not loaded in Envoy, and why; an Envoy that does not answer in
// time refuses, saying so.
func TestEnvoyConfigAdmissionWithoutAnswer(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	validator := func(j *envoyjudge.Judge) *EnvoyConfigValidator {
		return &EnvoyConfigValidator{Client: suite.Client, APIReader: suite.Client, Decoder: admission.NewDecoder(suite.Manager.GetScheme()),
			Policy: translate.Policy{Namespace: operatorNamespace}, Envoy: j}
	}
	req := createRequest(t, envoyConfig(ns, "app", examplev1.EnvoyResources{Clusters: rawList(app)}))

	none := envoyjudge.New(ctx, envoyjudge.Options{Envoy: "no-such-envoy", Concurrency: 1, Timeout: time.Second})
	resp := validator(none).Handle(ctx, req)
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "not loaded in a real Envoy: no Envoy to load EnvoyConfigs in (--envoy-path no-such-envoy)") {
		t.Errorf("without an Envoy: allowed %v, warnings %q; want it admitted with a warning", resp.Allowed, resp.Warnings)
	}
	resp = validator(nil).Handle(ctx, req)
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "not loaded in a real Envoy: no Envoy was configured") {
		t.Errorf("without a judge: allowed %v, warnings %q; want it admitted with a warning", resp.Allowed, resp.Warnings)
	}

	stalling := envoyjudge.New(ctx, envoyjudge.Options{Envoy: realenvoy.Stalling(t), Concurrency: 1, Timeout: 100 * time.Millisecond})
	resp = validator(stalling).Handle(ctx, req)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "EnvoyConfig app is invalid: Envoy did not finish loading it within 100ms") {
		t.Errorf("an Envoy that does not answer: allowed %v, %v; want it refused for the timeout", resp.Allowed, resp.Result)
	}
	// What the rules refuse is refused before Envoy runs.
	bad := createRequest(t, envoyConfig(ns, "bad", examplev1.EnvoyResources{Clusters: rawList(`{"name": "c", "connect_timeout": "-1s"}`)}))
	if resp := validator(stalling).Handle(ctx, bad); resp.Allowed || stalling.Runs() != 1 {
		t.Errorf("invalid content: allowed %v after %d runs of Envoy; want it refused by the rules, Envoy not run again", resp.Allowed, stalling.Runs())
	}
}

// A second identical admission takes Envoy's verdict from the cache: Envoy
// runs once.
func TestEnvoyVerdictCachedAcrossAdmissions(t *testing.T) {
	envoy := realenvoy.Require(t)
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	j := envoyjudge.New(ctx, envoyjudge.Options{Envoy: envoy, Concurrency: 1, Timeout: realenvoy.JudgeTimeout})
	v := &EnvoyConfigValidator{Client: suite.Client, APIReader: suite.Client, Decoder: admission.NewDecoder(suite.Manager.GetScheme()),
		Policy: translate.Policy{Namespace: operatorNamespace}, Envoy: j}
	refused := envoyFamilies[len(envoyFamilies)-1]
	for i := range 2 {
		resp := v.Handle(ctx, createRequest(t, envoyConfig(ns, refused.name, refused.res)))
		if resp.Allowed || !strings.Contains(resp.Result.Message, refused.said) || j.Runs() != 1 {
			t.Errorf("admission %d: allowed %v, %v, after %d runs of Envoy; want it refused, Envoy run once", i+1, resp.Allowed, resp.Result, j.Runs())
		}
	}
}
