package xdstest

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// Exfiltration is an EnvoyConfig's content that would have its fleet's
// proxies hand out what only their pods hold, and that the content policy
// refuses: the routes that tests of admission and of the controller try.
type Exfiltration struct {
	Name      string
	Resources examplev1.EnvoyResources
	// Refused are the fields each refusal names, as "<resource> (<name>): <field>".
	Refused []string
	// Listeners and Clusters are the names of what it defines, which a
	// fleet must never be served.
	Listeners, Clusters []string
}

// Exfiltrations returns the routes of theft that the content policy closes,
// for an operator in operatorNamespace.
func Exfiltrations(operatorNamespace string) []Exfiltration {
	hcm := `filter_chains[0].filters[0].typed_config(HttpConnectionManager).`
	body := hcm + `route_config.virtual_hosts[0].routes[0].direct_response.body.`
	endpoint := `load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address`
	tls := `transport_socket.typed_config(UpstreamTlsContext).common_tls_context.tls_certificates[0].`
	return []Exfiltration{
		{
			Name:      "serviceaccount-token",
			Resources: examplev1.EnvoyResources{Listeners: raws(directResponse("token", 8080, `{"filename": "/var/run/secrets/kubernetes.io/serviceaccount/token"}`))},
			Refused:   []string{`spec.resources.listeners[0] ("token"): ` + body + "filename"},
			Listeners: []string{"token"},
		},
		{
			Name:      "xds-key",
			Resources: examplev1.EnvoyResources{Listeners: raws(directResponse("key", 8081, fmt.Sprintf(`{"filename": %q}`, proxy.ClientCertDir+"/"+proxy.ClientKeyFile)))},
			Refused:   []string{`spec.resources.listeners[0] ("key"): ` + body + "filename"},
			Listeners: []string{"key"},
		},
		{
			Name:      "environment",
			Resources: examplev1.EnvoyResources{Listeners: raws(directResponse("env", 8082, `{"environment_variable": "KUBERNETES_SERVICE_HOST"}`))},
			Refused:   []string{`spec.resources.listeners[0] ("env"): ` + body + "environment_variable"},
			Listeners: []string{"env"},
		},
		{
			// The environment through the substitution formatter and a tracing tag.
			Name: "environment-through-formats",
			Resources: examplev1.EnvoyResources{Listeners: raws(strings.Replace(strings.Replace(directResponse("env-format", 8083, `{"inline_string": "x"}`),
				`"domains": ["*"], `, `"domains": ["*"], "response_headers_to_add": [{"header": {"key": "x-env", "value": "%ENVIRONMENT(KUBERNETES_SERVICE_HOST)%"}}], `, 1),
				`"http_filters": [`, `"tracing": {"custom_tags": [{"tag": "env", "environment": {"name": "KUBERNETES_SERVICE_HOST"}}]}, "http_filters": [`, 1))},
			Refused: []string{
				`spec.resources.listeners[0] ("env-format"): ` + hcm + "route_config.virtual_hosts[0].response_headers_to_add[0].header.value",
				`spec.resources.listeners[0] ("env-format"): ` + hcm + "tracing.custom_tags[0].environment.name",
			},
			Listeners: []string{"env-format"},
		},
		{
			// A destination outside a cluster: a tracer's daemon.
			Name: "tracer-to-the-metadata-service",
			Resources: examplev1.EnvoyResources{Listeners: raws(strings.Replace(directResponse("tracer", 8084, `{"inline_string": "x"}`),
				`"http_filters": [`, `"tracing": {"provider": {"name": "envoy.tracers.xray", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.XRayConfig", `+
					`"segment_name": "s", "daemon_endpoint": {"protocol": "UDP", "address": "169.254.169.254", "port_value": 2000}}}}, "http_filters": [`, 1))},
			Refused:   []string{`spec.resources.listeners[0] ("tracer"): ` + hcm + "tracing.provider.typed_config(XRayConfig).daemon_endpoint.address"},
			Listeners: []string{"tracer"},
		},
		{
			Name: "relay-to-the-operator",
			Resources: examplev1.EnvoyResources{
				Listeners: raws(tcpProxy("relay", 9000, "operator")),
				Clusters: raws(cluster("operator", fmt.Sprintf("kube-envoy-controller-xds.%s.svc", operatorNamespace), 18000,
					fmt.Sprintf(`, "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {`+
						`"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "common_tls_context": {`+
						`"tls_certificates": [{"certificate_chain": {"filename": %q}, "private_key": {"filename": %q}}]}}}`,
						proxy.ClientCertDir+"/"+proxy.ClientCertFile, proxy.ClientCertDir+"/"+proxy.ClientKeyFile))),
			},
			Refused: []string{
				`spec.resources.clusters[0] ("operator"): ` + endpoint,
				`spec.resources.clusters[0] ("operator"): ` + tls + "certificate_chain.filename",
				`spec.resources.clusters[0] ("operator"): ` + tls + "private_key.filename",
			},
			Listeners: []string{"relay"}, Clusters: []string{"operator"},
		},
		{
			Name:      "metadata-service",
			Resources: examplev1.EnvoyResources{Listeners: raws(tcpProxy("metadata", 9001, "metadata")), Clusters: raws(cluster("metadata", "169.254.169.254", 80, ""))},
			Refused:   []string{`spec.resources.clusters[0] ("metadata"): ` + endpoint},
			Listeners: []string{"metadata"}, Clusters: []string{"metadata"},
		},
		{
			// A metadata service that is not link-local.
			Name:      "metadata-service-not-link-local",
			Resources: examplev1.EnvoyResources{Listeners: raws(tcpProxy("metadata-alibaba", 9004, "metadata-alibaba")), Clusters: raws(cluster("metadata-alibaba", "100.100.100.200", 80, ""))},
			Refused:   []string{`spec.resources.clusters[0] ("metadata-alibaba"): ` + endpoint},
			Listeners: []string{"metadata-alibaba"}, Clusters: []string{"metadata-alibaba"},
		},
		{
			Name:      "admin-port",
			Resources: examplev1.EnvoyResources{Listeners: raws(tcpProxy("admin", 9002, "admin")), Clusters: raws(cluster("admin", "127.0.0.1", proxy.AdminPort, ""))},
			Refused:   []string{`spec.resources.clusters[0] ("admin"): ` + endpoint},
			Listeners: []string{"admin"}, Clusters: []string{"admin"},
		},
		{
			// Any name may resolve to loopback.
			Name:      "admin-port-by-name",
			Resources: examplev1.EnvoyResources{Listeners: raws(tcpProxy("admin-by-name", 9003, "admin-by-name")), Clusters: raws(cluster("admin-by-name", "localtest.me", proxy.AdminPort, ""))},
			Refused:   []string{`spec.resources.clusters[0] ("admin-by-name"): ` + endpoint},
			Listeners: []string{"admin-by-name"}, Clusters: []string{"admin-by-name"},
		},
	}
}

func raws(items ...string) []runtime.RawExtension {
	out := make([]runtime.RawExtension, len(items))
	for i, s := range items {
		out[i] = runtime.RawExtension{Raw: []byte(s)}
	}
	return out
}

func directResponse(name string, port int, body string) string {
	return fmt.Sprintf(`{"name": %q, "address": {"socket_address": {"address": "0.0.0.0", "port_value": %d}}, "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {`+
		`"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", "stat_prefix": %q, `+
		`"route_config": {"name": %q, "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": %s}}]}]}, `+
		`"http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`,
		name, port, name, name, body)
}

func tcpProxy(name string, port int, cluster string) string {
	return fmt.Sprintf(`{"name": %q, "address": {"socket_address": {"address": "0.0.0.0", "port_value": %d}}, "filter_chains": [{"filters": [{"name": "tcp", "typed_config": {`+
		`"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": %q, "cluster": %q}}]}]}`, name, port, name, cluster)
}

func cluster(name, host string, port int, extra string) string {
	typ := "STATIC"
	if host[0] < '0' || host[0] > '9' {
		typ = "STRICT_DNS"
	}
	return fmt.Sprintf(`{"name": %q, "type": %q, "connect_timeout": "1s", "load_assignment": {"cluster_name": %q, "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": %q, "port_value": %d}}}}]}]}%s}`,
		name, typ, name, host, port, extra)
}
