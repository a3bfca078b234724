package envoyload_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// samples are resources of every kind, by its list, that name one another
// as a fleet's do: a load check of a new kind needs one of it here.
var samples = map[string][]string{
	"listeners": {
		`{"name": "tcp", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10000}},
		  "filter_chains": [{"filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "tcp", "cluster": "backend"}}]}]}`,
		// For proxyless gRPC clients: loaded as its connection manager.
		`{"name": "grpc", "api_listener": {"api_listener": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
		  "stat_prefix": "grpc", "rds": {"route_config_name": "routes", "config_source": {"ads": {}, "resource_api_version": "V3"}},
		  "http_filters": [{"name": "router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}}`,
	},
	"routes": {`{"name": "routes", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "backend"}}]}]}`},
	"clusters": {`{"name": "backend", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}},
	  "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
	    "common_tls_context": {"tls_certificate_sds_secret_configs": [{"name": "client", "sds_config": {"ads": {}, "resource_api_version": "V3"}}]}}}}`},
	"endpoints": {`{"cluster_name": "backend", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 8080}}}}]}]}`},
	"secrets":   {`{"name": "token", "generic_secret": {"secret": {"inline_string": "s"}}}`},
}

// load has a real Envoy load r, when there is one.
func load(t *testing.T, r envoyload.Resources) {
	t.Helper()
	envoy := realenvoy.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := envoyload.Validate(ctx, envoy, t.TempDir(), r); err != nil {
		t.Fatal(err)
	}
}

// bootstrap returns r's Bootstrap, decoded.
func bootstrap(t *testing.T, r envoyload.Resources) *bootstrapv3.Bootstrap {
	t.Helper()
	js, err := r.Bootstrap()
	if err != nil {
		t.Fatal(err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(js, b); err != nil {
		t.Fatalf("the bootstrap: %v", err)
	}
	return b
}

// Every kind of resource.Kinds goes into the bootstrap where its kind
// says, and Envoy loads an EnvoyConfig's resources of every kind.
func TestEveryKind(t *testing.T) {
	for _, k := range resource.Kinds {
		if len(samples[k.Field]) == 0 {
			t.Errorf("no sample of %s: a load check of it is untested", k.Field)
		}
	}
	r, err := envoyload.FromSpec(specOf(t, samples))
	if err != nil {
		t.Fatal(err)
	}
	b := bootstrap(t, r)
	names := func(list string) []string {
		var out []string
		switch list {
		case "static_resources.listeners":
			for _, l := range b.GetStaticResources().GetListeners() {
				out = append(out, l.GetName())
			}
		case "static_resources.clusters":
			for _, c := range b.GetStaticResources().GetClusters() {
				out = append(out, c.GetName())
			}
		case "static_resources.secrets":
			for _, s := range b.GetStaticResources().GetSecrets() {
				out = append(out, s.GetName())
			}
		}
		return out
	}
	want := map[string][]string{"listeners": {"tcp", "grpc"}, "routes": {"envoyload/routes/0"}, "clusters": {"backend"},
		"endpoints": {"envoyload/endpoints/0"}, "secrets": {"token"}}
	for _, k := range resource.Kinds {
		for _, name := range want[k.Field] {
			if got := names(k.Static); !slices.Contains(got, name) {
				t.Errorf("%s: %q is not among %s: %q", k.Field, name, k.Static, got)
			}
		}
	}
	load(t, r)
}

// A new kind of resource (RTDS's runtime layers, say) is loaded where its
// entry of Kinds says, by nothing else.
func TestANewKind(t *testing.T) {
	layers := resource.Kind{Field: "runtimes", TypeURL: resourcev3.RuntimeType, Static: "layered_runtime.layers",
		AsStatic: func(res map[string]any, _ int) map[string]any {
			return map[string]any{"name": res["name"], "static_layer": res["layer"]}
		}}
	defer envoyload.SetKinds(append(slices.Clone(resource.Kinds[:]), layers))()

	var r envoyload.Resources
	before := r.Digest()
	if err := r.Add("runtimes", []byte(`{"name": "from-yaml", "layer": {"health_check.min_interval": 10}}`)); err != nil {
		t.Fatal(err)
	}
	layer, _ := structpb.NewStruct(map[string]any{"re2.max_program_size.error_level": 1000})
	if err := r.AddMessage(&runtimev3.Runtime{Name: "from-message", Layer: layer}); err != nil {
		t.Fatal(err)
	}
	if r.Digest() == before {
		t.Error("the digest does not change with a runtime layer")
	}
	var got []string
	for _, l := range bootstrap(t, r).GetLayeredRuntime().GetLayers() {
		if l.GetStaticLayer() != nil {
			got = append(got, l.GetName())
		}
	}
	if !slices.Equal(got, []string{"from-yaml", "from-message"}) {
		t.Errorf("the bootstrap's static runtime layers are %q", got)
	}
	load(t, r)
}

// An unknown list is an error.
func TestUnknownList(t *testing.T) {
	var r envoyload.Resources
	if err := r.Add("runtimes", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "runtimes") {
		t.Errorf("a list no kind has: %v", err)
	}
}

// specOf returns an EnvoyConfig's spec.resources holding lists.
func specOf(t *testing.T, lists map[string][]string) examplev1.EnvoyResources {
	t.Helper()
	var res examplev1.EnvoyResources
	for _, k := range resource.Kinds {
		for _, s := range lists[k.Field] {
			*k.List(&res) = append(*k.List(&res), runtime.RawExtension{Raw: []byte(s)})
		}
	}
	return res
}
