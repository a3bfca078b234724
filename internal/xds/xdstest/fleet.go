package xdstest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// Tenant is the content of the i-th EnvoyConfig of a fleet of tenants, as
// the benchmarks of admission and revisions size a fleet: a listener of its
// own port, whose connection manager takes a route configuration over ADS
// that routes a host of its own to a cluster of its own, on localhost. No
// two tenants' names or listener addresses meet; salt, when not empty,
// makes the content another with the same names.
func Tenant(i int, salt string) examplev1.EnvoyResources {
	raw := func(format string, args ...any) []runtime.RawExtension {
		return []runtime.RawExtension{{Raw: fmt.Appendf(nil, format, args...)}}
	}
	return examplev1.EnvoyResources{
		Listeners: raw(`{"name": "tenant-%[1]d", "address": {"socket_address": {"address": "0.0.0.0", "port_value": %[2]d}},
  "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
    "stat_prefix": "tenant_%[1]d", "rds": {"route_config_name": "tenant-%[1]d", "config_source": {"ads": {}, "resource_api_version": "V3"}},
    "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`, i, 10000+i),
		Routes: raw(`{"name": "tenant-%[1]d", "virtual_hosts": [{"name": "tenant-%[1]d", "domains": ["tenant-%[1]d.example.com"],
  "request_headers_to_add": [{"header": {"key": "x-tenant", "value": "tenant-%[1]d%[2]s"}}],
  "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "tenant-%[1]d", "timeout": "15s"}}]}]}`, i, salt),
		Clusters: raw(`{"name": "tenant-%[1]d", "type": "STATIC", "connect_timeout": "1s",
  "load_assignment": {"cluster_name": "tenant-%[1]d", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 8080}}}}]}]}}`, i),
	}
}
