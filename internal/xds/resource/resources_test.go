package resource

import (
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

func raw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

// A complete, valid fleet configuration: an HTTP listener whose route
// configuration comes over RDS and sends traffic to an EDS cluster.
const (
	validListener = `
name: http
address: {socket_address: {address: 0.0.0.0, port_value: 8080}}
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: http
      rds: {route_config_name: local, config_source: {ads: {}, resource_api_version: V3}}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
	validRoute = `
name: local
virtual_hosts:
- name: all
  domains: ["*"]
  routes:
  - match: {prefix: /}
    route: {cluster: backend}
`
	validCluster = `
name: backend
type: EDS
connect_timeout: 1s
eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
`
	validEndpoints = `
cluster_name: backend
endpoints:
- lb_endpoints:
  - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 9000}}}
`
	// A public secret: EnvoyConfigs may not hold private keys inline
	// (translate.Admit), which come from Secrets named in spec.tlsSecrets.
	validSecret = `
name: upstream-ca
validation_context:
  trusted_ca: {inline_string: "-----BEGIN CERTIFICATE-----"}
`
)

// validSamples are a valid resource of each kind, by its list.
var validSamples = map[string]string{"listeners": validListener, "routes": validRoute, "clusters": validCluster,
	"endpoints": validEndpoints, "secrets": validSecret}

// validResources are an EnvoyConfig's resources: one of each kind.
func validResources() examplev1.EnvoyResources {
	var res examplev1.EnvoyResources
	for _, k := range Kinds {
		*k.List(&res) = []runtime.RawExtension{raw(validSamples[k.Field])}
	}
	return res
}

func TestParseValid(t *testing.T) {
	for _, k := range Kinds {
		if validSamples[k.Field] == "" {
			t.Fatalf("no valid sample of %s in validSamples", k.Field)
		}
	}
	rs, errs := Parse("ns/a", validResources())
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if len(rs) != len(Kinds) {
		t.Fatalf("got %d resources, want %d", len(rs), len(Kinds))
	}
	byType := resourcesByType(rs)
	for _, k := range Kinds {
		if len(byType[k.TypeURL]) != 1 {
			t.Errorf("%s: %d resources", k.Field, len(byType[k.TypeURL]))
		}
	}
}

// Invalid resources are refused, each with a message naming the resource and the field.
func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name  string
		field string // which list
		yaml  string
		want  []string // substrings of the message
	}{
		{"unknown listener field", "listeners", "name: l\nadress: {}", []string{"spec.resources.listeners[0]", `unknown field "adress"`}},
		{"v2 cluster hosts", "clusters", "name: c\nconnect_timeout: 1s\nhosts: []", []string{"spec.resources.clusters[0]", `unknown field "hosts"`}},
		{"listener without name", "listeners", "address: {socket_address: {address: 0.0.0.0, port_value: 80}}", []string{"listeners[0]", "a name is required"}},
		{"cluster without name", "clusters", "connect_timeout: 1s", []string{"clusters[0]", "Cluster.Name"}},
		{"route without name", "routes", "virtual_hosts: []", []string{"routes[0]", "a name is required"}},
		{"endpoints without cluster name", "endpoints", "endpoints: []", []string{"endpoints[0]", "ClusterName"}},
		{"secret without name", "secrets", "tls_certificate: {}", []string{"secrets[0]", "a name is required"}},
		{"port out of range", "listeners", "name: l\naddress: {socket_address: {address: 0.0.0.0, port_value: 70000}}", []string{`listeners[0] ("l")`, "PortValue"}},
		{"socket address without address", "listeners", "name: l\naddress: {socket_address: {port_value: 80}}", []string{`("l")`, "SocketAddress.Address"}},
		{"negative connect timeout", "clusters", "name: c\nconnect_timeout: -1s", []string{`clusters[0] ("c")`, "ConnectTimeout"}},
		{"bad duration", "clusters", "name: c\nconnect_timeout: soon", []string{"clusters[0]", "connect_timeout"}},
		{"unknown enum", "clusters", "name: c\ntype: MAGIC", []string{"clusters[0]", "MAGIC"}},
		{"unknown lb policy", "clusters", "name: c\nlb_policy: BEST", []string{"clusters[0]", "BEST"}},
		{"wrong type of value", "clusters", "name: c\nconnect_timeout: 1s\nper_connection_buffer_limit_bytes: lots", []string{"clusters[0]", "per_connection_buffer_limit_bytes"}},
		{"virtual host without domains", "routes", "name: r\nvirtual_hosts: [{name: v, domains: []}]", []string{`routes[0] ("r")`, "Domains"}},
		{"virtual host without name", "routes", "name: r\nvirtual_hosts: [{domains: ['*']}]", []string{`routes[0] ("r")`, "VirtualHost.Name"}},
		{"route without match", "routes", "name: r\nvirtual_hosts: [{name: v, domains: ['*'], routes: [{route: {cluster: c}}]}]", []string{`routes[0] ("r")`, "Match"}},
		{"route action without cluster", "routes", "name: r\nvirtual_hosts: [{name: v, domains: ['*'], routes: [{match: {prefix: /}, route: {}}]}]", []string{`routes[0] ("r")`, "ClusterSpecifier"}},
		{"unregistered typed config", "listeners", `name: l
filter_chains: [{filters: [{name: x, typed_config: {"@type": type.googleapis.com/no.such.Filter}}]}]`, []string{"listeners[0]", "no.such.Filter"}},
		{"typed config with unknown field", "listeners", `name: l
filter_chains: [{filters: [{name: envoy.filters.network.http_connection_manager, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, stat_prefx: x}}]}]`, []string{"listeners[0]", "stat_prefx"}},
		{"hcm without stat prefix", "listeners", `name: l
filter_chains: [{filters: [{name: envoy.filters.network.http_connection_manager, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, rds: {route_config_name: r, config_source: {ads: {}}}}}]}]`, []string{`listeners[0] ("l")`, "StatPrefix"}},
		{"lb endpoint weight zero", "endpoints", "cluster_name: c\nendpoints: [{lb_endpoints: [{endpoint: {}, load_balancing_weight: 0}]}]", []string{`endpoints[0] ("c")`, "LoadBalancingWeight"}},
		{"not an object", "clusters", "[1, 2]", []string{"clusters[0]"}},
		{"not yaml", "routes", "{", []string{"routes[0]"}},
	}
	if len(tests) < 20 {
		t.Fatalf("the table must hold at least 20 cases")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := parseOne(tt.field, tt.yaml)
			if len(errs) != 1 || len(got) != 0 {
				t.Fatalf("got %d resources and errors %v, want one error", len(got), errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("error %q does not mention %q", errs[0], w)
				}
			}
		})
	}
}

func TestParseDuplicateName(t *testing.T) {
	res := examplev1.EnvoyResources{Clusters: []runtime.RawExtension{raw(validCluster), raw(validCluster)}}
	_, errs := Parse("ns/a", res)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `spec.resources.clusters[1]: cluster "backend" is already defined at spec.resources.clusters[0]`) {
		t.Errorf("errors = %v", errs)
	}
}

func resourcesByType(rs []Resource) map[string][]types.Resource {
	out := map[string][]types.Resource{}
	for _, r := range rs {
		out[r.Kind.TypeURL] = append(out[r.Kind.TypeURL], r.Message)
	}
	return out
}

func mustParse(t *testing.T, res examplev1.EnvoyResources) map[string][]types.Resource {
	t.Helper()
	rs, errs := Parse("ns/a", res)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	return resourcesByType(rs)
}

func TestVersionIsContentHash(t *testing.T) {
	second := raw(strings.Replace(validCluster, "name: backend", "name: second", 1))
	first := validResources()
	first.Clusters = append(first.Clusters, second)
	a := Version(mustParse(t, first))
	// The same content, written with other spacing, its
	// clusters in another order.
	res := validResources()
	res.Listeners = []runtime.RawExtension{raw(strings.ReplaceAll(validListener, "\n", "\n\n"))}
	res.Clusters = []runtime.RawExtension{second, res.Clusters[0]}
	b := Version(mustParse(t, res))
	if a != b {
		t.Errorf("same content, versions %s and %s", a, b)
	}
	res.Clusters = []runtime.RawExtension{raw(strings.Replace(validCluster, "1s", "2s", 1)), second}
	c := Version(mustParse(t, res))
	if c == a {
		t.Error("different content, same version")
	}
}

// The versions of a content are those that the releases before gave it
// (these values were computed by the build before resources were encoded):
// during an upgrade, replicas of both releases give the same content the
// same version, and a proxy that moves from one to the other is not sent
// its configuration again (the server serves each type at its Version). A
// dependency that changes how a message marshals changes them too, and so
// pushes every resource to every proxy when it is rolled out: this test
// says so.
func TestVersionsAreStable(t *testing.T) {
	byType := mustParse(t, validResources())
	if got, want := Version(byType), "2366f2f93c04d2cb"; got != want {
		t.Errorf("Version = %s, want %s", got, want)
	}
	want := map[string]string{"listeners": "87ea8c2817c4c5cf", "routes": "9fa0663fcee49621",
		"clusters": "5cdbd1402f2d39ea", "endpoints": "e3b29723d6697767", "secrets": "3ba844d0e487570a"}
	for _, k := range Kinds {
		if got := Version(map[string][]types.Resource{k.TypeURL: byType[k.TypeURL]}); got != want[k.Field] {
			t.Errorf("Version of the %s = %s, want %s", k.Field, got, want[k.Field])
		}
	}
}
