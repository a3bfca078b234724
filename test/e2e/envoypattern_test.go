//go:build e2e

package e2e

import (
	"slices"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// biggerFleet holds more than its proxies use: a route configuration no
// listener names, a tlsSecrets entry no listener uses, and the load
// assignment of a cluster that is not EDS.
var biggerFleet = `
apiVersion: example.com/v1
kind: Envoy
metadata: {name: edge}
spec: {replicas: 0}
---
apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: bigger}
spec:
  envoyRef: edge
  tlsSecrets:
  - {name: server-cert, secretRef: web-tls}
  - {name: spare-cert, secretRef: web-tls}
  resources:
    listeners:
` + realenvoy.TLSListener("https", 8443, "server-cert") + `        - name: envoy.filters.network.http_connection_manager
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
            stat_prefix: https
            rds: {route_config_name: web, config_source: {ads: {}, resource_api_version: V3}}
            http_filters:
            - name: envoy.filters.http.router
              typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
    routes:
    - name: web
      virtual_hosts: [{name: web, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: web}}]}]
    - name: not-yet-used
      virtual_hosts: [{name: later, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: static}}]}]
    clusters:
    - name: web
      type: EDS
      connect_timeout: 1s
      eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
    - name: static
      type: STATIC
      connect_timeout: 1s
      load_assignment:
        cluster_name: static
        endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.2, port_value: 80}}}}]}]
    endpoints:
    - cluster_name: web
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}}]}]
    - cluster_name: static
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.2, port_value: 80}}}}]}]
`

// A client that subscribes as Envoy does (listeners and clusters to all,
// then by name the routes, endpoints and secrets they name) is served all it
// asks for by a fleet that holds more than its proxies use, over state of
// the world and delta, and both count as proxies that accepted it.
func TestEnvoyPatternOnABiggerFleet(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "e2e-envoy-pattern")
	crtPath, keyPath, _ := writeCertificate(t, t.TempDir(), "web.example.com")
	applyTLSSecret(t, ns, crtPath, keyPath)
	kubectl.Run(t, "-n", ns, "label", "secret", "web-tls", "kube-envoy-controller.io/xds-secret=tls")
	kubectl.Apply(t, ns, biggerFleet)
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/bigger", `{.status.conditions[?(@.type=="Accepted")].status}`, "True")
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/bigger", `{.status.conditions[?(@.type=="Degraded")].status}`, "False")

	want := xdstest.Served{
		resourcev3.ClusterType: {"static", "web"}, resourcev3.ListenerType: {"https"}, resourcev3.EndpointType: {"web"},
		resourcev3.RouteType: {"web"}, resourcev3.SecretType: {"server-cert"},
	}
	c := dialAsFleet(t, ns, "edge")
	fleet := ns + "/edge"
	for name, sub := range map[string]xdstest.Subscriber{
		"sotw":  xdstest.OpenADS(t, c, fleet, "envoy-sotw").Subscriber(),
		"delta": xdstest.OpenDelta(t, c, fleet, "envoy-delta").Subscriber(),
	} {
		served, err := xdstest.SubscribeAsEnvoy(sub)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for typ, names := range want {
			if !slices.Equal(served[typ], names) {
				t.Errorf("%s: %s served %v, want %v", name, typ, served[typ], names)
			}
		}
	}
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/bigger", "{.status.proxies.acked}", "2")
}
