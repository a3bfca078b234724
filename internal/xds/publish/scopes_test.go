package publish

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// listenerJSON is a listener on port with one HTTP connection manager of
// stat_prefix prefix, over RDS route configuration rds, or with an inline
// route configuration sending everything to cluster inline when rds is "".
func listenerJSON(name string, port int, prefix, rds, inline string) string {
	routes := fmt.Sprintf(`"rds": {"route_config_name": %q, "config_source": {"ads": {}}}`, rds)
	if rds == "" {
		routes = fmt.Sprintf(`"route_config": {"name": "inline", "virtual_hosts": [{"name": "all", "domains": ["*"],
			"routes": [{"match": {"prefix": "/"}, "route": {"cluster": %q}}]}]}`, inline)
	}
	return fmt.Sprintf(`{"name": %q, "address": {"socket_address": {"address": "0.0.0.0", "port_value": %d}},
		"filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
			"typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
				"stat_prefix": %q, %s,
				"http_filters": [{"name": "envoy.filters.http.router",
					"typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`,
		name, port, prefix, routes)
}

// routeJSON is route configuration name sending /<cluster> to each cluster
// and the rest to the first, with a timeout of timeout.
func routeJSON(name, timeout string, clusters ...string) string {
	routes := ""
	for _, c := range clusters {
		routes += fmt.Sprintf(`{"match": {"prefix": "/%s"}, "route": {"cluster": %q, "timeout": %q}},`, c, c, timeout)
	}
	routes += fmt.Sprintf(`{"match": {"prefix": "/"}, "route": {"cluster": %q}}`, clusters[0])
	return fmt.Sprintf(`{"name": %q, "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [%s]}]}`, name, routes)
}

func clusterJSON(name, timeout string) string {
	return fmt.Sprintf(`{"name": %q, "type": "EDS", "connect_timeout": %q, "eds_cluster_config": {"eds_config": {"ads": {}}}}`, name, timeout)
}

// config is EnvoyConfig ns/name with those resources.
func config(name string, listeners, routes, clusters []string, endpoints ...string) translate.Config {
	raw := func(in []string) []runtime.RawExtension {
		var out []runtime.RawExtension
		for _, s := range in {
			out = append(out, runtime.RawExtension{Raw: []byte(s)})
		}
		return out
	}
	spec := examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{
		Listeners: raw(listeners), Routes: raw(routes), Clusters: raw(clusters), Endpoints: raw(endpoints)}}
	return translate.Config{Name: "ns/" + name, Spec: spec}
}

func TestTouchedScopes(t *testing.T) {
	ingress := listenerJSON("ingress", 8080, "ingress", "web", "")
	admin := listenerJSON("admin", 8081, "admin", "", "admin")
	web := routeJSON("web", "5s", "web")
	base := []translate.Config{
		config("gw", []string{ingress, admin}, nil, []string{clusterJSON("admin", "1s")}),
		config("web", nil, []string{web}, []string{clusterJSON("web", "1s"), clusterJSON("api", "1s")}),
	}
	with := func(i int, c translate.Config) []translate.Config {
		out := append([]translate.Config(nil), base...)
		out[i] = c
		return out
	}
	endpoint := `{"cluster_name": "web", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.0.0.1", "port_value": 80}}}}]}]}`
	for _, tc := range []struct {
		name          string
		before, after []translate.Config
		want          Touched
	}{
		{name: "nothing changed", before: base, after: base, want: Touched{}},
		{name: "a cluster changed: its scope, by its author",
			before: base, after: with(1, config("web", nil, []string{web}, []string{clusterJSON("web", "2s"), clusterJSON("api", "1s")})),
			want: Touched{"cluster:web": {"ns/web"}}},
		{name: "a new cluster, referenced by nothing yet: nothing traffic shows",
			before: base, after: with(1, config("web", nil, []string{web}, []string{clusterJSON("web", "1s"), clusterJSON("api", "1s"), clusterJSON("new", "1s")})),
			want: Touched{}},
		{name: "a new cluster, and a route that sends to it: both",
			before: base, after: with(1, config("web", nil, []string{routeJSON("web", "5s", "web", "new")}, []string{clusterJSON("web", "1s"), clusterJSON("api", "1s"), clusterJSON("new", "1s")})),
			want: Touched{"http:ingress": {"ns/web"}, "cluster:new": {"ns/web"}}},
		{name: "a route configuration over RDS changed: the connection managers that use it",
			before: base, after: with(1, config("web", nil, []string{routeJSON("web", "9s", "web")}, []string{clusterJSON("web", "1s"), clusterJSON("api", "1s")})),
			want: Touched{"http:ingress": {"ns/web"}}},
		{name: "a changed route sends to a cluster it did not: that cluster too",
			before: base, after: with(1, config("web", nil, []string{routeJSON("web", "5s", "web", "api")}, []string{clusterJSON("web", "1s"), clusterJSON("api", "1s")})),
			want: Touched{"http:ingress": {"ns/web"}, "cluster:api": {"ns/web"}}},
		{name: "a listener changed: its connection managers, by the listener's author",
			before: base, after: with(0, config("gw", []string{listenerJSON("ingress", 8080, "ingress", "web", ""), listenerJSON("admin", 8082, "admin", "", "admin")}, nil, []string{clusterJSON("admin", "1s")})),
			want: Touched{"http:admin": {"ns/gw"}}},
		{name: "a listener's inline route sends elsewhere: its scope and the cluster newly sent to",
			before: base, after: with(0, config("gw", []string{ingress, listenerJSON("admin", 8081, "admin", "", "api")}, nil, []string{clusterJSON("admin", "1s")})),
			want: Touched{"http:admin": {"ns/gw"}, "cluster:api": {"ns/gw"}}},
		{name: "a new listener over an existing route configuration",
			before: base, after: with(0, config("gw", []string{ingress, admin, listenerJSON("public", 8443, "public", "web", "")}, nil, []string{clusterJSON("admin", "1s")})),
			want: Touched{"http:public": {"ns/gw"}}},
		{name: "a route configuration and its listener changed by two authors",
			before: base,
			after: []translate.Config{
				config("gw", []string{listenerJSON("ingress", 9090, "ingress", "web", ""), admin}, nil, []string{clusterJSON("admin", "1s")}),
				config("web", nil, []string{routeJSON("web", "1s", "web")}, []string{clusterJSON("web", "1s"), clusterJSON("api", "1s")}),
			},
			want: Touched{"http:ingress": {"ns/gw", "ns/web"}}},
		{name: "only endpoints changed: nothing traffic shows by scope",
			before: base, after: with(1, config("web", nil, []string{web}, []string{clusterJSON("web", "1s"), clusterJSON("api", "1s")}, endpoint)),
			want: Touched{}},
		{name: "a removed cluster touches nothing",
			before: base, after: with(1, config("web", nil, []string{web}, []string{clusterJSON("web", "1s")})),
			want: Touched{}},
		{name: "from nothing: everything is new",
			before: nil, after: base[:1],
			want: Touched{"http:ingress": {"ns/gw"}, "http:admin": {"ns/gw"}, "cluster:admin": {"ns/gw"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TouchedScopes(tc.before, tc.after)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("touched %v, want %v", got, tc.want)
			}
		})
	}
}

// What finding the scopes a change touched costs the leader, which does it
// each time it steps a rollout judged by its proxies' figures: n
// EnvoyConfigs of a listener, a route configuration and five clusters
// each, one of them changed.
func BenchmarkTouchedScopes(b *testing.B) {
	for _, n := range []int{10, 100} {
		var before, after []translate.Config
		for i := range n {
			name := fmt.Sprintf("tenant-%d", i)
			var cs []string
			for j := range 5 {
				cs = append(cs, clusterJSON(fmt.Sprintf("%s-%d", name, j), "1s"))
			}
			c := config(name, []string{listenerJSON(name, 8000+i, name, name, "")}, []string{routeJSON(name, "5s", name+"-0")}, cs)
			before, after = append(before, c), append(after, c)
		}
		after[0] = config("tenant-0", []string{listenerJSON("tenant-0", 8000, "tenant-0", "tenant-0", "")},
			[]string{routeJSON("tenant-0", "9s", "tenant-0-0", "tenant-0-1")}, nil)
		b.Run(fmt.Sprint(n, " EnvoyConfigs"), func(b *testing.B) {
			for range b.N {
				if t := TouchedScopes(before, after); len(t) == 0 {
					b.Fatal("nothing touched")
				}
			}
		})
	}
}
