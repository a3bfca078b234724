package xds

import (
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
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
	validSecret = `
name: server-cert
tls_certificate:
  certificate_chain: {inline_string: "-----BEGIN CERTIFICATE-----"}
  private_key: {inline_string: "-----BEGIN PRIVATE KEY-----"}
`
)

func validResources() examplev1.EnvoyResources {
	return examplev1.EnvoyResources{
		Listeners: []runtime.RawExtension{raw(validListener)},
		Routes:    []runtime.RawExtension{raw(validRoute)},
		Clusters:  []runtime.RawExtension{raw(validCluster)},
		Endpoints: []runtime.RawExtension{raw(validEndpoints)},
		Secrets:   []runtime.RawExtension{raw(validSecret)},
	}
}

func TestParseValid(t *testing.T) {
	rs, errs := Parse("ns/a", validResources())
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if len(rs) != 5 {
		t.Fatalf("got %d resources, want 5", len(rs))
	}
	fleet := Build([]Config{{Name: "ns/a", Resources: rs}}, nil)
	if len(fleet.Rejected) != 0 || len(fleet.Clashes) != 0 {
		t.Fatalf("rejected %v, clashes %v", fleet.Rejected, fleet.Clashes)
	}
	for _, typ := range []string{resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.SecretType} {
		if len(fleet.Resources[typ]) != 1 {
			t.Errorf("%s: %d resources", typ, len(fleet.Resources[typ]))
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
			res := examplev1.EnvoyResources{}
			r := []runtime.RawExtension{raw(tt.yaml)}
			switch tt.field {
			case "listeners":
				res.Listeners = r
			case "clusters":
				res.Clusters = r
			case "routes":
				res.Routes = r
			case "endpoints":
				res.Endpoints = r
			case "secrets":
				res.Secrets = r
			}
			got, errs := Parse("ns/a", res)
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

func mustParse(t *testing.T, name string, created time.Time, res examplev1.EnvoyResources) Config {
	t.Helper()
	rs, errs := Parse(name, res)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	return Config{Name: name, Created: created, Resources: rs}
}

func TestReferences(t *testing.T) {
	t0 := time.Now()
	tests := []struct {
		name string
		res  examplev1.EnvoyResources
		want string
	}{
		{"listener's route configuration missing", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{raw(validListener)}},
			`spec.resources.listeners[0] ("http"): route configuration "local" does not exist`},
		{"route's cluster missing", examplev1.EnvoyResources{Routes: []runtime.RawExtension{raw(validRoute)}},
			`spec.resources.routes[0] ("local"): cluster "backend" does not exist`},
		{"tcp proxy's cluster missing", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{raw(`
name: tcp
address: {socket_address: {address: 0.0.0.0, port_value: 9000}}
filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: db}}]}]`)}},
			`spec.resources.listeners[0] ("tcp"): cluster "db" does not exist`},
		{"inline route's cluster missing", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{raw(`
name: api
api_listener:
  api_listener:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: api
    route_config: {name: inline, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: gone}}]}]}
    http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]`)}},
			`spec.resources.listeners[0] ("api"): cluster "gone" does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fleet := Build([]Config{mustParse(t, "ns/a", t0, tt.res)}, nil)
			errs := fleet.Rejected["ns/a"]
			if len(errs) != 1 || errs[0].Error() != tt.want {
				t.Errorf("rejected = %v, want %q", errs, tt.want)
			}
			if n := len(fleet.Resources[resourcev3.ListenerType]) + len(fleet.Resources[resourcev3.RouteType]); n != 0 {
				t.Errorf("a rejected config's resources were served: %v", fleet.Resources)
			}
		})
	}
}

// References may cross configs: one config's route may send traffic to another's cluster.
func TestReferencesAcrossConfigs(t *testing.T) {
	t0 := time.Now()
	routes := mustParse(t, "ns/routes", t0, examplev1.EnvoyResources{
		Listeners: []runtime.RawExtension{raw(validListener)}, Routes: []runtime.RawExtension{raw(validRoute)}})
	clusters := mustParse(t, "ns/clusters", t0, examplev1.EnvoyResources{Clusters: []runtime.RawExtension{raw(validCluster)}})
	fleet := Build([]Config{routes, clusters}, nil)
	if len(fleet.Rejected) != 0 || len(fleet.Resources[resourcev3.ClusterType]) != 1 || len(fleet.Resources[resourcev3.ListenerType]) != 1 {
		t.Errorf("rejected %v, resources %v", fleet.Rejected, fleet.Resources)
	}
}

// A rejected config falls back to its last accepted version: no proxy loses what it had.
func TestRejectedConfigKeepsLastGood(t *testing.T) {
	t0 := time.Now()
	good := mustParse(t, "ns/a", t0, validResources())
	before := Build([]Config{good}, nil)

	changed := validResources()
	changed.Clusters = nil // the route now leads nowhere
	bad := mustParse(t, "ns/a", t0, changed)
	after := Build([]Config{bad}, map[string]Config{"ns/a": good})
	if len(after.Rejected["ns/a"]) == 0 {
		t.Fatal("the dangling reference was not reported")
	}
	if after.Version != before.Version {
		t.Errorf("version %s, want the last good %s", after.Version, before.Version)
	}
}

func TestMergeClash(t *testing.T) {
	t0 := time.Now()
	older := mustParse(t, "ns/older", t0, examplev1.EnvoyResources{Clusters: []runtime.RawExtension{raw(validCluster)}})
	newerRes := examplev1.EnvoyResources{Clusters: []runtime.RawExtension{raw(strings.Replace(validCluster, "connect_timeout: 1s", "connect_timeout: 9s", 1))}}
	newer := mustParse(t, "ns/newer", t0.Add(time.Second), newerRes)
	fleet := Build([]Config{newer, older}, nil)
	cs := fleet.Resources[resourcev3.ClusterType]
	if len(cs) != 1 {
		t.Fatalf("clusters = %v", cs)
	}
	if d := clusterTimeout(cs[0]); d != time.Second {
		t.Errorf("the newer config's cluster won (timeout %s)", d)
	}
	if len(fleet.Clashes["ns/older"]) != 1 || len(fleet.Clashes["ns/newer"]) != 1 {
		t.Errorf("clashes = %v: both configs must be told", fleet.Clashes)
	}
	if !strings.Contains(fleet.Clashes["ns/newer"][0], `cluster "backend" (spec.resources.clusters[0]) is also defined by EnvoyConfig ns/older, which is older and wins`) {
		t.Errorf("message = %q", fleet.Clashes["ns/newer"][0])
	}
}

func TestVersionIsContentHash(t *testing.T) {
	t0 := time.Now()
	second := raw(strings.Replace(validCluster, "name: backend", "name: second", 1))
	first := validResources()
	first.Clusters = append(first.Clusters, second)
	a := Build([]Config{mustParse(t, "ns/a", t0, first)}, nil)
	// The same content, from another config, written with other spacing, its
	// clusters in another order.
	res := validResources()
	res.Listeners = []runtime.RawExtension{raw(strings.ReplaceAll(validListener, "\n", "\n\n"))}
	res.Clusters = []runtime.RawExtension{second, res.Clusters[0]}
	b := Build([]Config{mustParse(t, "ns/b", t0.Add(time.Hour), res)}, nil)
	if a.Version != b.Version {
		t.Errorf("same content, versions %s and %s", a.Version, b.Version)
	}
	res.Clusters = []runtime.RawExtension{raw(strings.Replace(validCluster, "1s", "2s", 1)), second}
	c := Build([]Config{mustParse(t, "ns/b", t0, res)}, nil)
	if c.Version == a.Version {
		t.Error("different content, same version")
	}
}

func clusterTimeout(r any) time.Duration {
	return r.(interface {
		GetConnectTimeout() *durationpb.Duration
	}).GetConnectTimeout().AsDuration()
}
