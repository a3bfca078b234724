package translate

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

func raw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

func config(name string, res examplev1.EnvoyResources) Config {
	return Config{Name: "ns/" + name, Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: res}}
}

const (
	listenerL = `{"name": "http", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8080}}, "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", "stat_prefix": "h", "rds": {"route_config_name": "r", "config_source": {"ads": {}}}, "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`
	routeR    = `{"name": "r", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "k"}}]}]}`
)

func clusterNamed(name string) runtime.RawExtension {
	return raw(`{"name": "` + name + `", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}}}}`)
}

// Admission judges the fleet as it would be after the change, for create,
// update and delete, and blames a change only for what it breaks.
func TestAdmit(t *testing.T) {
	L := config("l", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{raw(listenerL)}})
	R := config("r", examplev1.EnvoyResources{Routes: []runtime.RawExtension{raw(routeR)}})
	C := config("c", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("k"), clusterNamed("other")}})
	cOnlyOther := config("c", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("other")}})
	badCluster := config("c", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{raw(`{"name": "k", "type": "EDS", "bogus": 1}`)}})
	rToM := config("r", examplev1.EnvoyResources{Routes: []runtime.RawExtension{raw(`{"name": "r", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "m"}}]}]}`)}})
	// Listeners of other EnvoyConfigs: on L's address, on the same port of
	// another address, and on another port.
	onL := config("x", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{listenerOn("x", "0.0.0.0", 8080)}})
	onOtherAddress := config("x", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{listenerOn("x", "10.0.0.1", 8080)}})
	onOtherPort := config("x", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{listenerOn("x", "0.0.0.0", 8081)}})
	alsoOnL := config("y", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{listenerOn("y", "0.0.0.0", 8080)}})
	// Beside L's wildcard: a specific address of its port, without
	// SO_REUSEPORT, which Envoy cannot listen on too.
	noReuse := raw(strings.Replace(string(listenerOn("x", "10.0.0.1", 8080).Raw), `"filter_chains"`, `"enable_reuse_port": false, "filter_chains"`, 1))
	overlapsL := config("x", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{noReuse}})
	// A listener whose Zipkin tracer sends to a cluster of its own config,
	// and to one that is not there.
	traced := func(cluster string) Config {
		l := strings.Replace(listenerL, `"http_filters"`, `"tracing": {"provider": {"name": "z", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig", "collector_cluster": "`+cluster+`", "collector_endpoint": "/api", "collector_endpoint_version": "HTTP_JSON"}}}, "http_filters"`, 1)
		l = strings.Replace(l, `"name": "http"`, `"name": "traced"`, 1)
		return config("t", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{raw(strings.Replace(l, `"port_value": 8080`, `"port_value": 9090`, 1))}})
	}
	tracedToK, tracedToNothing := traced("k"), traced("zipkin")
	tests := []struct {
		name   string
		before []Config
		change string
		after  *Config
		want   []string
	}{
		{"create a listener on another config's listener's address", []Config{L, R, C}, "ns/x", &onL,
			[]string{`spec.resources.listeners[0] ("x"): address: 0.0.0.0:8080 is also the address of listener spec.resources.listeners[0] ("http") of EnvoyConfig ns/l: Envoy refuses two listeners on one address`}},
		{"update a listener onto another config's listener's address", []Config{L, R, C, onOtherPort}, "ns/x", &onL,
			[]string{`spec.resources.listeners[0] ("x"): address: 0.0.0.0:8080 is also the address of listener spec.resources.listeners[0] ("http") of EnvoyConfig ns/l: Envoy refuses two listeners on one address`}},
		{"a listener on the same port of another address", []Config{L, R, C}, "ns/x", &onOtherAddress, nil},
		{"a listener without SO_REUSEPORT on an address another config's wildcard covers", []Config{L, R, C}, "ns/x", &overlapsL,
			[]string{`spec.resources.listeners[0] ("x"): address: 10.0.0.1:8080 and 0.0.0.0:8080, the address of listener spec.resources.listeners[0] ("http") of EnvoyConfig ns/l: the two overlap, and with enable_reuse_port false on either, Envoy drops the second to listen (cannot listen() errno=98)`}},
		{"an address already shared is not the change's fault", []Config{L, R, C, alsoOnL}, "ns/x", &onOtherPort, nil},
		{"create a consistent config", []Config{L, R}, "ns/c", &C, nil},
		{"create a route to a missing cluster", []Config{L}, "ns/r", &R,
			[]string{`spec.resources.routes[0] ("r"): cluster "k" does not exist`}},
		{"update that removes a cluster another config's route needs", []Config{L, R, C}, "ns/c", &cOnlyOther,
			[]string{`it would break EnvoyConfig ns/r: spec.resources.routes[0] ("r"): cluster "k" does not exist`}},
		{"delete of the config whose cluster a route needs", []Config{L, R, C}, "ns/c", nil,
			[]string{`it would break EnvoyConfig ns/r: spec.resources.routes[0] ("r"): cluster "k" does not exist`}},
		{"delete of the route configuration a listener needs", []Config{L, R, C}, "ns/r", nil,
			[]string{`it would break EnvoyConfig ns/l: spec.resources.listeners[0] ("http"): route configuration "r" does not exist`}},
		{"delete of a config nothing needs", []Config{L, R, C}, "ns/l", nil, nil},
		{"update to a route whose cluster is missing", []Config{L, R, C}, "ns/r", &rToM,
			[]string{`spec.resources.routes[0] ("r"): cluster "m" does not exist`}},
		{"an invalid resource is refused before references", []Config{L, R, C}, "ns/c", &badCluster,
			[]string{`spec.resources.clusters[0]: proto: (line 1:30): unknown field "bogus"`}},
		{"a reference that already dangled is not the change's fault", []Config{L, R}, "ns/x",
			&Config{Name: "ns/x", Spec: examplev1.EnvoyConfigSpec{Resources: examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("other")}}}}, nil},
		{"an update that fixes what dangled", []Config{L, R, cOnlyOther}, "ns/c", &C, nil},
		{"a tracer to a cluster of the fleet", []Config{L, R, C}, "ns/t", &tracedToK, nil},
		{"a tracer to a missing cluster", []Config{L, R, C}, "ns/t", &tracedToNothing,
			[]string{`spec.resources.listeners[0] ("traced"): cluster "zipkin" does not exist`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Admit(Policy{}, tt.before, tt.change, tt.after); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Admit = %q\nwant    %q", got, tt.want)
			}
		})
	}
}

// listenerOn is a listener named name on address:port, with a TCP proxy to
// cluster k.
func listenerOn(name, address string, port int) runtime.RawExtension {
	return raw(fmt.Sprintf(`{"name": %q, "address": {"socket_address": {"address": %q, "port_value": %d}}, "filter_chains": [{"filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "k"}}]}]}`, name, address, port))
}
