package resource

import "fmt"

// How a load check has Envoy build a resource of each kind (Kind.Static,
// Kind.AsStatic): `envoy --mode validate` builds only the bootstrap's
// static resources, each as Envoy builds it when it comes over xDS.

// routesAsStatic: a route configuration inline in the connection manager
// of a listener of its own, which binds no port, with validate_clusters
// false unless it says otherwise, as RDS loads it.
func routesAsStatic(rc map[string]any, i int) map[string]any {
	if _, set := rc["validate_clusters"]; !set {
		rc["validate_clusters"] = false
	}
	return map[string]any{
		"name":         fmt.Sprintf("envoyload/routes/%d", i),
		"address":      map[string]any{"pipe": map[string]any{"path": fmt.Sprintf("@envoyload-routes-%d", i)}},
		"bind_to_port": false,
		"filter_chains": []any{map[string]any{"filters": []any{map[string]any{
			"name": "envoy.filters.network.http_connection_manager",
			"typed_config": map[string]any{
				"@type":        "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
				"stat_prefix":  "envoyload",
				"route_config": rc,
				"http_filters": []any{map[string]any{"name": "envoy.filters.http.router",
					"typed_config": map[string]any{"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}},
			},
		}}}},
	}
}

// endpointsAsStatic: a cluster load assignment as the endpoints of a
// STATIC cluster of its own, whose addresses Envoy resolves as EDS does.
func endpointsAsStatic(cla map[string]any, i int) map[string]any {
	return map[string]any{
		"name":            fmt.Sprintf("envoyload/endpoints/%d", i),
		"type":            "STATIC",
		"load_assignment": cla,
	}
}
