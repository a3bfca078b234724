package translate

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoregistry"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// testPolicy is the policy of the tests: an operator in the namespace
// kube-envoy-controller, with the other names xds.example.com, that
// allows one directory, one file and one environment variable.
var testPolicy = Policy{
	Files:     []string{"/etc/allowed/", "/etc/ca.pem"},
	Env:       []string{"ALLOWED"},
	Namespace: "kube-envoy-controller",
	Hosts:     []string{"xds.example.com", "10.96.0.10"},
}

// Resources of the policy's cases, in Envoy's JSON.
func hcmListener(routeConfig string, extra string) string {
	return `{"name": "l", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8080}}, "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {` +
		`"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", "stat_prefix": "h", ` +
		`"route_config": ` + routeConfig + extra + `, "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`
}

func directResponse(body string) string {
	return `{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": ` + body + `}}]}]}`
}

func routeTo(action string) string {
	return `{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": ` + action + `}]}]}`
}

func staticCluster(name, host string, port int, extra string) string {
	return fmt.Sprintf(`{"name": %q, "type": "STRICT_DNS", "connect_timeout": "1s", "load_assignment": {"cluster_name": %q, "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": %q, "port_value": %d}}}}]}]}%s}`,
		name, name, host, port, extra)
}

func tcpProxyListener(cluster string) string {
	return `{"name": "relay", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 9000}}, "filter_chains": [{"filters": [{"name": "tcp", "typed_config": {` +
		`"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "` + cluster + `"}}]}]}`
}

const upstreamTLSWithFleetCertificate = `, "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {` +
	`"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "common_tls_context": {` +
	`"tls_certificates": [{"certificate_chain": {"filename": "/etc/envoy/xds-tls/tls.crt"}, "private_key": {"filename": "/etc/envoy/xds-tls/tls.key"}}], ` +
	`"validation_context": {"trusted_ca": {"filename": "/etc/envoy/xds-tls/ca.crt"}}}}}`

// refusalsOf decodes raw as a resource of the kind named field, as the
// first of its kind in an EnvoyConfig of namespace ns, and returns what
// testPolicy refuses in it.
func refusalsOf(t *testing.T, ns, field, raw string) []string {
	t.Helper()
	k, err := resource.KindNamed(field)
	if err != nil {
		t.Fatal(err)
	}
	m, name, err := resource.Decode(k, []byte(raw))
	if err != nil {
		// Envoy's own rules refuse it as it is decoded already (an extension
		// this operator does not serve, a cluster of the bootstrap's name...).
		// The policy is judged on it all the same: it must hold whatever
		// decoding lets through.
		t.Logf("decoding refuses the case too: %v", err)
		mt, ferr := protoregistry.GlobalTypes.FindMessageByURL(k.TypeURL)
		if ferr != nil {
			t.Fatal(ferr)
		}
		m = mt.New().Interface()
		if err := protojson.Unmarshal([]byte(raw), m); err != nil {
			t.Fatalf("the case is not even Envoy's JSON: %v", err)
		}
		name = cachev3.GetResourceName(m)
	}
	r := resource.Resource{Kind: k, Name: name, Message: m, Path: "spec.resources." + field + "[0]", Source: ns + "/c"}
	return testPolicy.refusals(ns+"/c", []resource.Resource{r})
}

// Each rule of the policy, by the resource it refuses or lets through. want
// holds, for each refusal in the order of their fields, the field it names
// and a part of why.
func TestPolicy(t *testing.T) {
	hcm := `filter_chains[0].filters[0].typed_config(HttpConnectionManager).`
	body := hcm + `route_config.virtual_hosts[0].routes[0].direct_response.body.`
	endpoint := `load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address`
	tests := []struct {
		name, field, raw string
		namespace        string // "team" unless set
		want             [][2]string
	}{
		// Files.
		{"direct_response from the ServiceAccount token", "listeners",
			hcmListener(directResponse(`{"filename": "/var/run/secrets/kubernetes.io/serviceaccount/token"}`), ""), "",
			[][2]string{{body + "filename", `names the file "/var/run/secrets/kubernetes.io/serviceaccount/token", which the proxy may not read`}}},
		{"direct_response from the fleet's xDS key", "routes",
			directResponse(`{"filename": "/etc/envoy/xds-tls/tls.key"}`), "",
			[][2]string{{"virtual_hosts[0].routes[0].direct_response.body.filename", `"/etc/envoy/xds-tls/tls.key", the fleet's xDS client certificate`}}},
		{"the xDS key through the kubelet's symbolic link", "routes",
			directResponse(`{"filename": "/etc/envoy/xds-tls/..data/tls.key"}`), "",
			[][2]string{{"direct_response.body.filename", "the fleet's xDS client certificate"}}},
		{"the xDS key from an allowed directory, climbing out", "routes",
			directResponse(`{"filename": "/etc/allowed/../envoy/xds-tls/tls.key"}`), "",
			[][2]string{{"direct_response.body.filename", "the fleet's xDS client certificate"}}},
		{"climbing out of an allowed directory", "routes",
			directResponse(`{"filename": "/etc/allowed/../passwd"}`), "",
			[][2]string{{"direct_response.body.filename", "not an absolute, clean path"}}},
		{"a relative path", "routes", directResponse(`{"filename": "etc/allowed/page"}`), "",
			[][2]string{{"direct_response.body.filename", "not an absolute, clean path"}}},
		{"a file below an allowed directory", "routes", directResponse(`{"filename": "/etc/allowed/page.html"}`), "", nil},
		{"an allowed file", "clusters", staticCluster("k", "10.0.0.1", 443, `, "transport_socket": {"name": "tls", "typed_config": {`+
			`"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "common_tls_context": {"validation_context": {"trusted_ca": {"filename": "/etc/ca.pem"}}}}}`), "", nil},
		{"inline content", "routes", directResponse(`{"inline_string": "hello"}`), "", nil},
		{"an environment variable", "routes", directResponse(`{"environment_variable": "HOME"}`), "",
			[][2]string{{"direct_response.body.environment_variable", `names the environment variable "HOME"`}}},
		{"an allowed environment variable", "routes", directResponse(`{"environment_variable": "ALLOWED"}`), "", nil},

		// The environment through the substitution formatter and tracing tags.
		{"a header to add from the environment", "routes",
			`{"name": "r", "request_headers_to_add": [{"header": {"key": "x-home", "value": "%ENVIRONMENT(HOME)%"}}], "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "direct_response": {"status": 200}}]}]}`, "",
			[][2]string{{"request_headers_to_add[0].header.value", `through the substitution formatter's %ENVIRONMENT(HOME)%: names the environment variable "HOME"`}}},
		{"a header to add, as raw bytes, from the environment", "routes",
			`{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "response_headers_to_add": [{"header": {"key": "x-home", "raw_value": "JUVOVklST05NRU5UKEhPTUUpJQ=="}}], "routes": [{"match": {"prefix": "/"}, "direct_response": {"status": 200}}]}]}`, "",
			[][2]string{{"virtual_hosts[0].response_headers_to_add[0].header.raw_value", "%ENVIRONMENT(HOME)%"}}},
		{"a header to add from the environment, with a length, among other commands", "routes",
			`{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "direct_response": {"status": 200}, "response_headers_to_add": [{"header": {"key": "x", "value": "%START_TIME% %ENVIRONMENT(ALLOWED)% %environment(AWS_SECRET_ACCESS_KEY):8%"}}]}]}]}`, "",
			[][2]string{{"virtual_hosts[0].routes[0].response_headers_to_add[0].header.value", `"AWS_SECRET_ACCESS_KEY"`}}},
		{"a header to add from an allowed environment variable", "routes",
			`{"name": "r", "request_headers_to_add": [{"header": {"key": "x", "value": "%ENVIRONMENT(ALLOWED):16%"}}], "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "direct_response": {"status": 200}}]}]}`, "", nil},
		{"an access log's text format from the environment", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "access_log": [{"name": "out", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog", "log_format": {"text_format_source": {"inline_string": "%ENVIRONMENT(KUBERNETES_SERVICE_HOST)%\n"}}}}]`), "",
			[][2]string{{hcm + "access_log[0].typed_config(StdoutAccessLog).log_format.text_format_source.inline_string", `"KUBERNETES_SERVICE_HOST"`}}},
		{"an access log's JSON format from the environment", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "access_log": [{"name": "out", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StderrAccessLog", "log_format": {"json_format": {"home": "%ENVIRONMENT(HOME)%", "n": {"deep": "%ENVIRONMENT(PATH)%"}}}}}]`), "",
			[][2]string{
				{hcm + "access_log[0].typed_config(StderrAccessLog).log_format.json_format.fields[home].string_value", `"HOME"`},
				{hcm + "access_log[0].typed_config(StderrAccessLog).log_format.json_format.fields[n].struct_value.fields[deep].string_value", `"PATH"`}}},
		{"a local reply's body format from the environment", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "local_reply_config": {"mappers": [{"filter": {"status_code_filter": {"comparison": {"op": "GE", "value": {"default_value": 400, "runtime_key": "k"}}}}, "body_format_override": {"text_format": "%ENVIRONMENT(HOME)%"}}], "body_format": {"text_format": "%ENVIRONMENT(USER)%"}}`), "",
			[][2]string{
				{hcm + "local_reply_config.body_format.text_format", `"USER"`},
				{hcm + "local_reply_config.mappers[0].body_format_override.text_format", `"HOME"`}}},
		{"a direct response's body from the environment", "routes", directResponse(`{"inline_string": "%ENVIRONMENT(HOME)%"}`), "",
			[][2]string{{"direct_response.body.inline_string", `"HOME"`}}},
		{"a tracing tag from the environment", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"custom_tags": [{"tag": "home", "environment": {"name": "HOME", "default_value": "-"}}, {"tag": "ok", "environment": {"name": "ALLOWED"}}]}`), "",
			[][2]string{{hcm + "tracing.custom_tags[0].environment.name", `names the environment variable "HOME"`}}},
		{"a tracing tag from a literal", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"custom_tags": [{"tag": "t", "literal": {"value": "ENVIRONMENT(HOME)"}}]}`), "", nil},
		{"the environment in metadata, which nothing formats", "clusters", staticCluster("k", "10.0.0.1", 80, `, "metadata": {"filter_metadata": {"x": {"a": "%ENVIRONMENT(HOME)%"}}}`), "", nil},
		{"a secret's key from the fleet's xDS certificate", "secrets",
			`{"name": "s", "tls_certificate": {"certificate_chain": {"filename": "/etc/envoy/xds-tls/tls.crt"}, "private_key": {"filename": "/etc/envoy/xds-tls/tls.key"}}}`, "",
			[][2]string{{"tls_certificate.certificate_chain.filename", "xDS client certificate"}, {"tls_certificate.private_key.filename", "xDS client certificate"}}},
		{"a secret watching a directory", "secrets",
			`{"name": "s", "tls_certificate": {"certificate_chain": {"inline_string": "x"}, "watched_directory": {"path": "/var/run/secrets"}}}`, "",
			[][2]string{{"tls_certificate.watched_directory.path", `names the file "/var/run/secrets", which the proxy may not watch`}}},
		{"SDS from the bootstrap's file of the xDS certificate", "clusters", staticCluster("k", "10.0.0.1", 443, `, "transport_socket": {"name": "tls", "typed_config": {`+
			`"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "common_tls_context": {"tls_certificate_sds_secret_configs": [`+
			`{"name": "xds_client_certificate", "sds_config": {"path_config_source": {"path": "/etc/envoy/xds-client-certificate.yaml"}}}]}}}`), "",
			[][2]string{{"common_tls_context.tls_certificate_sds_secret_configs[0].sds_config.path_config_source.path", "the fleet's xDS client certificate"}}},
		{"an access log to the container's log", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "access_log": [{"name": "file", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog", "path": "/dev/stdout"}}]`), "", nil},
		{"an access log to a file", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "access_log": [{"name": "file", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog", "path": "/tmp/access.log"}}]`), "",
			[][2]string{{hcm + "access_log[0].typed_config(FileAccessLog).path", "which the proxy may not write"}}},
		{"an access log's format from a file", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "access_log": [{"name": "out", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog", "log_format": {"text_format_source": {"filename": "/var/run/secrets/kubernetes.io/serviceaccount/token"}}}}]`), "",
			[][2]string{{"access_log[0].typed_config(StdoutAccessLog).log_format.text_format_source.filename", "may not read"}}},
		{"a TLS key log", "clusters", staticCluster("k", "10.0.0.1", 443, `, "transport_socket": {"name": "tls", "typed_config": {`+
			`"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "common_tls_context": {"key_log": {"path": "/tmp/keys"}}}}`), "",
			[][2]string{{"common_tls_context.key_log.path", "may not write"}}},
		{"a health check event log", "clusters", staticCluster("k", "10.0.0.1", 80, `, "health_checks": [{"timeout": "1s", "interval": "1s", "unhealthy_threshold": 1, "healthy_threshold": 1, "tcp_health_check": {}, "event_log_path": "/tmp/hc"}]`), "",
			[][2]string{{"health_checks[0].event_log_path", "may not write"}}},
		{"a Unix socket", "endpoints", `{"cluster_name": "k", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {"path": "/var/run/app.sock"}}}}]}]}`, "",
			[][2]string{{"endpoints[0].lb_endpoints[0].endpoint.address.pipe.path", "may not open"}}},
		{"an abstract Unix socket", "endpoints", `{"cluster_name": "k", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {"path": "@app"}}}}]}]}`, "",
			[][2]string{{"pipe.path", "abstract Unix socket"}}},
		{"another network namespace", "clusters", staticCluster("k", "10.0.0.1", 80, `, "upstream_bind_config": {"source_address": {"address": "10.0.0.2", "port_value": 0, "network_namespace_filepath": "/proc/1/ns/net"}}`), "",
			[][2]string{{"upstream_bind_config.source_address.network_namespace_filepath", "may not open"}}},

		// Configuration from elsewhere.
		{"routes from another server", "listeners",
			strings.Replace(hcmListener(`{"name": "x"}`, ""), `"route_config": {"name": "x"}`, `"rds": {"route_config_name": "r", "config_source": {"api_config_source": {"api_type": "GRPC", "grpc_services": [{"envoy_grpc": {"cluster_name": "xds_cluster"}}]}}}`, 1), "",
			[][2]string{{hcm + "rds.config_source.api_config_source", "asks another server for configuration"}}},
		{"routes from a file", "listeners",
			strings.Replace(hcmListener(`{"name": "x"}`, ""), `"route_config": {"name": "x"}`, `"rds": {"route_config_name": "r", "config_source": {"path_config_source": {"path": "/etc/envoy/envoy.yaml"}}}`, 1), "",
			[][2]string{{hcm + "rds.config_source.path_config_source.path", "which the proxy would load configuration from: never allowed"}}},
		{"routes from an allowed file", "listeners",
			strings.Replace(hcmListener(`{"name": "x"}`, ""), `"route_config": {"name": "x"}`, `"rds": {"route_config_name": "r", "config_source": {"path_config_source": {"path": "/etc/allowed/routes.yaml"}}}`, 1), "",
			[][2]string{{hcm + "rds.config_source.path_config_source.path", "whatever --envoyconfig-allowed-files allows"}}},
		{"routes from an allowed file, the old way", "listeners",
			strings.Replace(hcmListener(`{"name": "x"}`, ""), `"route_config": {"name": "x"}`, `"rds": {"route_config_name": "r", "config_source": {"path": "/etc/allowed/routes.yaml"}}`, 1), "",
			[][2]string{{hcm + "rds.config_source.path", "never allowed"}}},
		{"the laundering: an access log written into an allowed directory, and endpoints loaded from it", "clusters",
			`{"name": "k", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"path_config_source": {"path": "/etc/allowed/eds.yaml", "watched_directory": {"path": "/etc/allowed/eds"}}}}}`, "",
			[][2]string{{"eds_cluster_config.eds_config.path_config_source.path", "an EnvoyConfig may write the files that flag allows"}}},
		{"an access log into an allowed directory", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "access_log": [{"name": "file", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog", "path": "/etc/allowed/access.log"}}]`), "", nil},
		{"a secret over SDS from an allowed file", "clusters", staticCluster("k", "10.0.0.1", 443, `, "transport_socket": {"name": "tls", "typed_config": {`+
			`"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "common_tls_context": {"tls_certificate_sds_secret_configs": [`+
			`{"name": "c", "sds_config": {"path_config_source": {"path": "/etc/allowed/sds.yaml"}}}]}}}`), "",
			[][2]string{{"common_tls_context.tls_certificate_sds_secret_configs[0].sds_config.path_config_source.path", "never allowed"}}},
		{"endpoints over ADS", "clusters", `{"name": "k", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}}}}`, "", nil},
		{"an extension in a TypedStruct", "listeners",
			strings.Replace(hcmListener(directResponse(`{"inline_string": "x"}`), ""), `"http_filters": [`, `"http_filters": [{"name": "envoy.filters.http.lua", "typed_config": {"@type": "type.googleapis.com/xds.type.v3.TypedStruct", `+
				`"type_url": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua", "value": {"default_source_code": {"inline_string": "io.open('/etc/envoy/xds-tls/tls.key')"}}}}, `, 1), "",
			[][2]string{{hcm + "http_filters[0].typed_config(TypedStruct)", "names its extension's type only as a string"}}},
		{"an extension in a Struct", "listeners",
			strings.Replace(hcmListener(directResponse(`{"inline_string": "x"}`), ""), `"http_filters": [`, `"http_filters": [{"name": "envoy.filters.http.lua", "typed_config": {"@type": "type.googleapis.com/google.protobuf.Struct", "value": {"inline_code": "x"}}}, `, 1), "",
			[][2]string{{hcm + "http_filters[0].typed_config(Struct)", "names its extension's type only as a string"}}},
		{"a Struct in metadata", "clusters", staticCluster("k", "10.0.0.1", 80, `, "metadata": {"typed_filter_metadata": {"x": {"@type": "type.googleapis.com/google.protobuf.Struct", "value": {"a": 1}}}}`), "", nil},
		{"a tracer with google_grpc and a bootstrap cluster", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.opentelemetry", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig", `+
				`"grpc_service": {"google_grpc": {"target_uri": "collector.example.com:4317", "stat_prefix": "otel", "call_credentials": [{"google_compute_engine": {}}]}}}}}`), "",
			[][2]string{{hcm + "tracing.provider.typed_config(OpenTelemetryConfig).grpc_service.google_grpc", "is a google_grpc service"}}},
		{"a tracer's collector at the xDS cluster", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig", `+
				`"collector_cluster": "xds_cluster", "collector_endpoint": "/api/v2/spans", "collector_endpoint_version": "HTTP_JSON"}}}`), "",
			[][2]string{{hcm + "tracing.provider.typed_config(ZipkinConfig).collector_cluster", "a cluster of the proxy's bootstrap"}}},

		// Destinations.
		{"the metadata service", "clusters", staticCluster("k", "169.254.169.254", 80, ""), "",
			[][2]string{{endpoint, `"169.254.169.254" is link-local`}}},
		{"the metadata service as one number", "clusters", staticCluster("k", "2852039166", 80, ""), "", [][2]string{{endpoint, "link-local"}}},
		{"the metadata service in hexadecimal", "clusters", staticCluster("k", "0xa9fea9fe", 80, ""), "", [][2]string{{endpoint, "link-local"}}},
		{"the metadata service in three parts", "clusters", staticCluster("k", "169.254.43518", 80, ""), "", [][2]string{{endpoint, "link-local"}}},
		{"the metadata service mapped into IPv6", "clusters", staticCluster("k", "::ffff:169.254.169.254", 80, ""), "", [][2]string{{endpoint, "link-local"}}},
		{"IPv6 link-local with a zone", "clusters", staticCluster("k", "fe80::1%eth0", 80, ""), "", [][2]string{{endpoint, "link-local"}}},
		{"AWS's IPv6 metadata service", "clusters", staticCluster("k", "fd00:ec2::254", 80, ""), "", [][2]string{{endpoint, "cloud metadata service"}}},
		{"the metadata service by name", "clusters", staticCluster("k", "Metadata.Google.Internal.", 80, ""), "", [][2]string{{endpoint, "cloud metadata service"}}},
		{"Google's metadata server by its short name", "clusters", staticCluster("k", "metadata", 80, ""), "", [][2]string{{endpoint, "cloud metadata service: Google Cloud's metadata server by its short name"}}},
		{"Google's metadata server by its short name, with a final dot", "clusters", staticCluster("k", "METADATA.", 80, ""), "", [][2]string{{endpoint, "(metadata.<namespace>)"}}},
		{"a Service called metadata, with its namespace", "clusters", staticCluster("k", "metadata.team", 80, ""), "", nil},
		{"Google's metadata server over IPv6", "clusters", staticCluster("k", "fd20:ce:0::254", 80, ""), "", [][2]string{{endpoint, "About VM metadata"}}},
		{"Alibaba's metadata service", "clusters", staticCluster("k", "100.100.100.200", 80, ""), "", [][2]string{{endpoint, "Alibaba Cloud's instance metadata service"}}},
		{"Alibaba's metadata service in hexadecimal", "clusters", staticCluster("k", "0x646464c8", 80, ""), "", [][2]string{{endpoint, "Alibaba Cloud"}}},
		{"Alibaba's metadata service mapped into IPv6", "clusters", staticCluster("k", "::ffff:100.100.100.200", 80, ""), "", [][2]string{{endpoint, "Alibaba Cloud"}}},
		{"Oracle's metadata service", "clusters", staticCluster("k", "192.0.0.192", 80, ""), "", [][2]string{{endpoint, "Oracle Cloud"}}},
		{"Azure's WireServer", "clusters", staticCluster("k", "168.63.129.16", 32526, ""), "", [][2]string{{endpoint, "Azure's WireServer"}}},
		{"the EKS Pod Identity Agent over IPv6", "clusters", staticCluster("k", "[fd00:ec2::23]", 80, ""), "", [][2]string{{endpoint, "EKS Pod Identity Agent"}}},
		{"Tencent's metadata service", "clusters", staticCluster("k", "metadata.tencentyun.com", 80, ""), "", [][2]string{{endpoint, "Tencent Cloud"}}},
		{"a DNS resolver at Azure's WireServer", "clusters", staticCluster("k", "web.team.svc.cluster.local", 80, `, "dns_resolvers": [{"socket_address": {"address": "168.63.129.16", "port_value": 53}}]`), "",
			[][2]string{{"dns_resolvers[0].socket_address.address", "Azure's WireServer"}}},
		{"an address beside Alibaba's", "clusters", staticCluster("k", "100.100.100.201", 80, ""), "", nil},
		{"the metadata service as endpoints", "endpoints", `{"cluster_name": "k", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "169.254.169.254", "port_value": 80}}}}]}]}`, "",
			[][2]string{{"endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address", "link-local"}}},
		{"a DNS resolver at the metadata service", "clusters", staticCluster("k", "web.team.svc.cluster.local", 80, `, "dns_resolvers": [{"socket_address": {"address": "169.254.169.254", "port_value": 53}}]`), "",
			[][2]string{{"dns_resolvers[0].socket_address.address", "link-local"}}},
		{"a link-local source address", "clusters", staticCluster("k", "10.0.0.1", 80, `, "upstream_bind_config": {"source_address": {"address": "169.254.1.1", "port_value": 0}}`), "", nil},
		{"the admin port", "clusters", staticCluster("k", "127.0.0.1", 19000, ""), "", [][2]string{{endpoint, `"127.0.0.1" at port 19000 is the proxy's own admin interface`}}},
		{"the admin port on another loopback address", "clusters", staticCluster("k", "127.1", 19000, ""), "", [][2]string{{endpoint, "admin interface"}}},
		{"the admin port on the unspecified address", "clusters", staticCluster("k", "0.0.0.0", 19000, ""), "", [][2]string{{endpoint, "admin interface"}}},
		{"the admin port over IPv6", "clusters", staticCluster("k", "::1", 19000, ""), "", [][2]string{{endpoint, "admin interface"}}},
		{"the admin port by name", "clusters", staticCluster("k", "localhost", 19000, ""), "", [][2]string{{endpoint, "admin interface"}}},
		{"the admin port below localhost", "clusters", staticCluster("k", "admin.localhost", 19000, ""), "", [][2]string{{endpoint, "admin interface"}}},
		{"the admin port by any name", "clusters", staticCluster("k", "admin.example.com", 19000, ""), "", [][2]string{{endpoint, "any host name may resolve to loopback"}}},
		{"the admin port by a name that says loopback", "clusters", staticCluster("k", "127.0.0.1.nip.io", 19000, ""), "", [][2]string{{endpoint, "admin interface"}}},
		{"the admin port by a Service's name", "clusters", staticCluster("k", "web.team.svc.cluster.local", 19000, ""), "", [][2]string{{endpoint, "admin interface"}}},
		{"the admin port by a name, as endpoints", "endpoints", `{"cluster_name": "k", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "proxy.example.com", "port_value": 19000}}}}]}]}`, "",
			[][2]string{{"endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address", "admin interface"}}},
		{"the admin port by a name, through the health check", "clusters", strings.Replace(staticCluster("k", "web.team.svc", 8080, ""), `"port_value": 8080}}}`, `"port_value": 8080}}, "health_check_config": {"port_value": 19000}}`, 1), "",
			[][2]string{{"load_assignment.endpoints[0].lb_endpoints[0].endpoint.health_check_config.port_value", "admin interface"}}},
		{"another host's port 19000, by its address", "clusters", staticCluster("k", "10.0.0.5", 19000, ""), "", nil},
		{"the admin port by the health check", "clusters", strings.Replace(staticCluster("k", "127.0.0.1", 8080, ""), `"port_value": 8080}}}`, `"port_value": 8080}}, "health_check_config": {"port_value": 19000}}`, 1), "",
			[][2]string{{"load_assignment.endpoints[0].lb_endpoints[0].endpoint.health_check_config.port_value", "admin interface"}}},
		{"the application on localhost", "clusters", staticCluster("k", "127.0.0.1", 8080, ""), "", nil},
		{"the ready port on localhost", "clusters", staticCluster("k", "localhost", 19001, ""), "", nil},
		{"a Service of the fleet's namespace", "clusters", staticCluster("k", "web.team.svc.cluster.local", 80, ""), "", nil},
		{"the operator's xDS Service", "clusters", staticCluster("k", "kube-envoy-controller-xds.kube-envoy-controller.svc.cluster.local", 18000, ""), "",
			[][2]string{{endpoint, "is the operator's"}}},
		{"the operator's xDS Service, written differently", "clusters", staticCluster("k", "Kube-Envoy-Controller-XDS.kube-envoy-controller.SVC.", 18000, ""), "",
			[][2]string{{endpoint, "is the operator's"}}},
		{"the operator's webhook through the search path", "clusters", staticCluster("k", "kube-envoy-controller-webhook.kube-envoy-controller", 443, ""), "",
			[][2]string{{endpoint, "is the operator's"}}},
		{"an operator's pod by its DNS name", "clusters", staticCluster("k", "10-1-2-3.kube-envoy-controller.pod.cluster.local", 8443, ""), "",
			[][2]string{{endpoint, "is the operator's"}}},
		{"the operator's other name", "clusters", staticCluster("k", "XDS.example.com", 18000, ""), "", [][2]string{{endpoint, "is the operator's"}}},
		{"the operator's address", "clusters", staticCluster("k", "10.96.0.10", 18000, ""), "", [][2]string{{endpoint, "is the operator's"}}},
		{"a short name, in the fleet's own namespace", "clusters", staticCluster("k", "kube-envoy-controller-xds", 18000, ""), "", nil},
		{"a short name, in the operator's namespace", "clusters", staticCluster("k", "kube-envoy-controller-xds", 18000, ""), "kube-envoy-controller",
			[][2]string{{endpoint, "is the operator's"}}},
		{"a public name that begins with the operator's namespace", "clusters", staticCluster("k", "kube-envoy-controller.example.org", 443, ""), "", nil},
		{"the relay of the issue: the xDS Service with the fleet's certificate", "clusters",
			staticCluster("relay", "kube-envoy-controller-xds.kube-envoy-controller.svc", 18000, upstreamTLSWithFleetCertificate), "",
			[][2]string{
				{endpoint, "is the operator's"},
				{"transport_socket.typed_config(UpstreamTlsContext).common_tls_context.tls_certificates[0].certificate_chain.filename", "xDS client certificate"},
				{"transport_socket.typed_config(UpstreamTlsContext).common_tls_context.tls_certificates[0].private_key.filename", "xDS client certificate"},
				{"transport_socket.typed_config(UpstreamTlsContext).common_tls_context.validation_context.trusted_ca.filename", "xDS client certificate"}}},
		// Destinations outside a cluster's endpoints.
		{"a tracer's daemon at the metadata service", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.xray", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.XRayConfig", `+
				`"segment_name": "s", "daemon_endpoint": {"protocol": "UDP", "address": "169.254.169.254", "port_value": 2000}}}}`), "",
			[][2]string{{hcm + "tracing.provider.typed_config(XRayConfig).daemon_endpoint.address", "link-local"}}},
		{"a tracer's daemon on localhost", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.xray", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.XRayConfig", `+
				`"segment_name": "s", "daemon_endpoint": {"protocol": "UDP", "address": "127.0.0.1", "port_value": 2000}}}}`), "", nil},
		{"a tracer's daemon at the admin port", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.xray", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.XRayConfig", `+
				`"segment_name": "s", "daemon_endpoint": {"protocol": "UDP", "address": "::1", "port_value": 19000}}}}`), "",
			[][2]string{{hcm + "tracing.provider.typed_config(XRayConfig).daemon_endpoint.address", "admin interface"}}},
		{"a Zipkin collector's host name at the metadata service", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig", `+
				`"collector_cluster": "k", "collector_endpoint": "/api/v2/spans", "collector_endpoint_version": "HTTP_JSON", "collector_hostname": "metadata.google.internal"}}}`), "",
			[][2]string{{hcm + "tracing.provider.typed_config(ZipkinConfig).collector_hostname", "cloud metadata service"}}},
		{"a Zipkin collector's host name in the operator's namespace", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig", `+
				`"collector_cluster": "k", "collector_endpoint": "/api/v2/spans", "collector_endpoint_version": "HTTP_JSON", "collector_hostname": "kube-envoy-controller-xds.kube-envoy-controller.svc:18000"}}}`), "",
			[][2]string{{hcm + "tracing.provider.typed_config(ZipkinConfig).collector_hostname", "is the operator's"}}},
		{"a Zipkin collector's own host name", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig", `+
				`"collector_cluster": "k", "collector_endpoint": "/api/v2/spans", "collector_endpoint_version": "HTTP_JSON", "collector_hostname": "zipkin.tracing.svc:9411"}}}`), "", nil},
		{"a Datadog collector's host name at the admin port", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.datadog", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.DatadogConfig", `+
				`"collector_cluster": "k", "service_name": "s", "collector_hostname": "localhost:19000"}}}`), "",
			[][2]string{{hcm + "tracing.provider.typed_config(DatadogConfig).collector_hostname", "admin interface"}}},
		{"an OpenTelemetry collector's URL at the metadata service", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.opentelemetry", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig", `+
				`"http_service": {"http_uri": {"uri": "http://[fd00:ec2::254]/v1/traces", "cluster": "k", "timeout": "1s"}}}}}`), "",
			[][2]string{{hcm + "tracing.provider.typed_config(OpenTelemetryConfig).http_service.http_uri.uri", "cloud metadata service"}}},
		{"an OpenTelemetry collector's URL", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.opentelemetry", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig", `+
				`"http_service": {"http_uri": {"uri": "http://otel.tracing.svc:4318/v1/traces", "cluster": "k", "timeout": "1s"}}}}}`), "", nil},
		{"a CONNECT tunnel to the admin port", "listeners",
			strings.Replace(tcpProxyListener("k"), `"cluster": "k"`, `"cluster": "k", "tunneling_config": {"hostname": "localhost:19000"}`, 1), "",
			[][2]string{{"filter_chains[0].filters[0].typed_config(TcpProxy).tunneling_config.hostname", "admin interface"}}},
		{"a listener on the admin port is not a destination", "listeners",
			strings.Replace(tcpProxyListener("k"), `"address": "0.0.0.0", "port_value": 9000`, `"address": "127.0.0.1", "port_value": 19000`, 1), "", nil},

		// Destinations a request chooses, and the bootstrap's clusters.
		{"a cluster from a request header", "routes", routeTo(`{"cluster_header": "x-cluster"}`), "",
			[][2]string{{"virtual_hosts[0].routes[0].route.cluster_header", "lets a request choose its cluster"}}},
		{"a weighted cluster from a request header", "routes", routeTo(`{"weighted_clusters": {"clusters": [{"cluster_header": "x-cluster", "weight": 1}]}}`), "",
			[][2]string{{"route.weighted_clusters.clusters[0].cluster_header", "lets a request choose its cluster"}}},
		{"a mirror from a request header", "routes", routeTo(`{"cluster": "k", "request_mirror_policies": [{"cluster_header": "x-mirror"}]}`), "",
			[][2]string{{"route.request_mirror_policies[0].cluster_header", "its mirror's cluster"}}},
		{"a cluster specifier plugin", "routes", routeTo(`{"cluster_specifier_plugin": "p"}`), "",
			[][2]string{{"route.cluster_specifier_plugin", "lets a plugin choose"}}},
		{"an ORIGINAL_DST cluster", "clusters", `{"name": "k", "type": "ORIGINAL_DST", "lb_policy": "CLUSTER_PROVIDED", "connect_timeout": "1s", "original_dst_lb_config": {"use_http_header": true}}`, "",
			[][2]string{{"type", "is ORIGINAL_DST"}}},
		{"a custom cluster type", "clusters", `{"name": "k", "connect_timeout": "1s", "cluster_type": {"name": "envoy.clusters.dynamic_forward_proxy"}}`, "",
			[][2]string{{"cluster_type", "is a custom cluster type"}}},
		{"a cluster named as the bootstrap's xDS cluster", "clusters", staticCluster("xds_cluster", "web.team.svc", 80, ""), "",
			[][2]string{{"load_assignment.cluster_name", "a cluster of the proxy's bootstrap"}, {"name", `"xds_cluster" is a cluster of the proxy's bootstrap`}}},
		{"a cluster named as the bootstrap's admin cluster", "clusters", `{"name": "envoy_admin", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}}}}`, "",
			[][2]string{{"name", `"envoy_admin" is a cluster of the proxy's bootstrap`}}},
		{"endpoints of the bootstrap's cluster", "endpoints", `{"cluster_name": "xds_cluster", "endpoints": []}`, "",
			[][2]string{{"cluster_name", "a cluster of the proxy's bootstrap"}}},
		{"a route to the bootstrap's cluster", "routes", routeTo(`{"cluster": "xds_cluster"}`), "",
			[][2]string{{"route.cluster", `names "xds_cluster"`}}},
		{"a weighted route to the admin cluster", "routes", routeTo(`{"weighted_clusters": {"clusters": [{"name": "envoy_admin", "weight": 1}]}}`), "",
			[][2]string{{"route.weighted_clusters.clusters[0].name", `names "envoy_admin"`}}},
		{"a TCP proxy to the admin cluster", "listeners", tcpProxyListener("envoy_admin"), "",
			[][2]string{{"filter_chains[0].filters[0].typed_config(TcpProxy).cluster", `names "envoy_admin"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tt.namespace
			if ns == "" {
				ns = "team"
			}
			got := refusalsOf(t, ns, tt.field, tt.raw)
			if len(got) != len(tt.want) {
				t.Fatalf("refusals:\n  %s\nwant %d", strings.Join(got, "\n  "), len(tt.want))
			}
			for i, w := range tt.want {
				prefix := "spec.resources." + tt.field + "[0] ("
				if !strings.HasPrefix(got[i], prefix) || !strings.Contains(got[i], w[0]+" ") || !strings.Contains(got[i], w[1]) {
					t.Errorf("refusal %d = %s\nwant it to name %s and say %q", i, got[i], w[0], w[1])
				}
			}
		})
	}
}

// One message, written out: the resource, the field, the file, and what the
// cluster administrator can allow.
func TestPolicyMessage(t *testing.T) {
	got := refusalsOf(t, "team", "routes", directResponse(`{"filename": "/var/run/secrets/kubernetes.io/serviceaccount/token"}`))
	want := `spec.resources.routes[0] ("r"): virtual_hosts[0].routes[0].direct_response.body.filename names the file ` +
		`"/var/run/secrets/kubernetes.io/serviceaccount/token", which the proxy may not read: an EnvoyConfig may name only the files that ` +
		`--envoyconfig-allowed-files allows (/etc/allowed/, /etc/ca.pem); serve certificates and keys from a kubernetes.io/tls Secret named in spec.tlsSecrets`
	if len(got) != 1 || got[0] != want {
		t.Errorf("refusals = %q\nwant      %q", got, want)
	}
}

// Every entry of the table of metadata services says where it comes from,
// is written as the policy compares it, is not link-local (which the
// policy refuses already), and is refused as a cluster's endpoint.
func TestMetadataServices(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range metadataServices {
		if m.what == "" || m.source == "" || !strings.HasPrefix(m.url, "https://") {
			t.Errorf("%s: say what it is and the provider's page that documents it (its title and address)", m.host)
		}
		if seen[m.host] {
			t.Errorf("%s is listed twice", m.host)
		}
		seen[m.host] = true
		if ip, err := netip.ParseAddr(m.host); err == nil {
			if ip.String() != m.host {
				t.Errorf("%s: write the address as %s", m.host, ip)
			}
			if ip.IsLinkLocalUnicast() {
				t.Errorf("%s is link-local, which the policy refuses whatever its provider", m.host)
			}
		} else if m.host != strings.ToLower(strings.TrimSuffix(m.host, ".")) {
			t.Errorf("%s: write the name in lower case, without a final dot", m.host)
		}
		got := refusalsOf(t, "team", "clusters", staticCluster("k", m.host, 80, ""))
		if len(got) != 1 || !strings.Contains(got[0], "is a cloud metadata service: "+m.what+" ("+m.source+", "+m.url+")") {
			t.Errorf("%s as a cluster's endpoint: refusals %q", m.host, got)
		}
	}
}

func TestParseIP(t *testing.T) {
	tests := map[string]string{
		"169.254.169.254":        "169.254.169.254",
		"2852039166":             "169.254.169.254",
		"0xa9fea9fe":             "169.254.169.254",
		"0XA9.0xFE.0251.254":     "169.254.169.254",
		"0251.0376.0251.0376":    "169.254.169.254",
		"169.254.43518":          "169.254.169.254",
		"169.16689662":           "169.254.169.254",
		"127.1":                  "127.0.0.1",
		"0":                      "0.0.0.0",
		"::ffff:169.254.169.254": "169.254.169.254",
		"fe80::1%eth0":           "fe80::1",
		"::1":                    "::1",
		// Host names.
		"web":              "",
		"a9fea9fe":         "",
		"1.2.3.4.5":        "",
		"256.1.1.1":        "",
		"08.1.1.1":         "",
		"1..1":             "",
		"0b1":              "",
		"1_000":            "",
		"169.254.169.254x": "",
	}
	for in, want := range tests {
		ip, ok := parseIP(in)
		got := ""
		if ok {
			got = ip.String()
		}
		if got != want {
			t.Errorf("parseIP(%q) = %q, want %q", in, got, want)
		}
		if ok && ip != netip.MustParseAddr(want) {
			t.Errorf("parseIP(%q) = %v", in, ip)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	tests := []struct {
		p    Policy
		want string
	}{
		{Policy{}, ""},
		{testPolicy, ""},
		{Policy{Files: []string{"/etc/envoy/"}}, "holds the fleet's xDS client certificate"},
		{Policy{Files: []string{"/etc/envoy/xds-tls/tls.key"}}, "holds the fleet's xDS client certificate"},
		{Policy{Files: []string{"/etc/envoy/xds-client-certificate.yaml"}}, "holds the fleet's xDS client certificate"},
		// What the proxy loads its own configuration from: an EnvoyConfig
		// that wrote there (an access log) would configure it.
		{Policy{Files: []string{"/etc/envoy/envoy.yaml"}}, "is or holds a file from which the proxy loads its own configuration"},
		{Policy{Files: []string{"/etc/envoy/xds-trusted-ca.yaml"}}, "from which the proxy loads its own configuration"},
		{Policy{Files: []string{"/etc/envoy/extra/"}}, "from which the proxy loads its own configuration"},
		{Policy{Files: []string{"/etc/envoy-pages/", "/etc/pages/", "/var/log/envoy/"}}, ""},
		{Policy{Files: []string{"/"}}, "allows every file"},
		{Policy{Files: []string{"/proc/self/root/etc/"}}, "below /proc"},
		{Policy{Files: []string{"/dev/fd/"}}, "below /proc, /dev/fd or /sys"},
		{Policy{Files: []string{"etc/x"}}, "not an absolute, clean path"},
		{Policy{Files: []string{"/etc/../x"}}, "not an absolute, clean path"},
		{Policy{Files: []string{"/etc//x"}}, "not an absolute, clean path"},
		{Policy{Env: []string{"A-B"}}, "not an environment variable's name"},
	}
	for _, tt := range tests {
		err := tt.p.Check()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v.Check() = %v, want %q", tt.p, err, tt.want)
		}
	}
}

// A revision recorded before the policy, or forged, is rendered without
// the EnvoyConfigs whose content the policy refuses, inline secrets
// included; the others are served as recorded.
func TestRenderServesNothingRefused(t *testing.T) {
	refused := config("refused", examplev1.EnvoyResources{
		Routes:  []runtime.RawExtension{raw(directResponse(`{"filename": "/etc/envoy/xds-tls/tls.key"}`))},
		Secrets: []runtime.RawExtension{raw(`{"name": "s", "generic_secret": {"secret": {"inline_string": "x"}}}`)},
	})
	kept := config("kept", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("k")}})
	resources, _ := Render(testPolicy, []Config{refused.Recorded(), kept.Recorded()}, []Config{refused, kept}, nil, nil)
	var got []string
	for typeURL, rs := range resources {
		for _, r := range rs {
			got = append(got, typeURL+" "+cachev3.GetResourceName(r))
		}
	}
	if len(got) != 1 || got[0] != resourcev3.ClusterType+" k" {
		t.Errorf("rendered %v, want only cluster k", got)
	}
	// The same revision, with a policy that allows the file, serves it all.
	allowing := Policy{Files: []string{"/etc/envoy/xds-tls/tls.key"}} // no Check: the test wants the rule that no allowance lifts
	resources, _ = Render(allowing, []Config{refused.Recorded(), kept.Recorded()}, []Config{refused, kept}, nil, nil)
	if len(resources[resourcev3.RouteType]) != 0 {
		t.Errorf("the fleet's xDS key was served with a policy that lists it: %v", resources[resourcev3.RouteType])
	}
}

// The laundering through an allowed directory, past admission: a listener
// that writes its access log into a directory the policy allows, and loads
// its routes from there. With the directory allowed, nothing of it is
// served: configuration is never loaded from a file.
func TestRenderServesNoConfigurationFromAllowedFiles(t *testing.T) {
	launder := config("launder", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{raw(strings.Replace(
		hcmListener(`{"name": "x"}`, `, "access_log": [{"name": "file", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog", "path": "/etc/allowed/routes.yaml", `+
			`"log_format": {"text_format_source": {"inline_string": "resources: [...]\n"}}}}]`),
		`"route_config": {"name": "x"}`, `"rds": {"route_config_name": "r", "config_source": {"path_config_source": {"path": "/etc/allowed/routes.yaml"}}}`, 1))}})
	kept := config("kept", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("k")}})
	if got := Admit(testPolicy, nil, launder.Name, &launder); len(got) != 1 || !strings.Contains(got[0], "rds.config_source.path_config_source.path names") {
		t.Errorf("Admit = %q, want the config source refused", got)
	}
	resources, _ := Render(testPolicy, []Config{launder.Recorded(), kept.Recorded()}, []Config{launder, kept}, nil, nil)
	if n := len(resources[resourcev3.ListenerType]); n != 0 {
		t.Errorf("%d listeners served, want none of the laundering EnvoyConfig's", n)
	}
	if len(resources[resourcev3.ClusterType]) != 1 {
		t.Errorf("clusters served: %v, want k", resources[resourcev3.ClusterType])
	}
}

// Admission refuses what the policy refuses, naming the EnvoyConfig's
// resource and field, and counts no refused EnvoyConfig among those that
// references may lead to: the controller serves none of it.
func TestAdmitPolicy(t *testing.T) {
	steal := config("steal", examplev1.EnvoyResources{Routes: []runtime.RawExtension{raw(directResponse(`{"environment_variable": "HOME"}`))}})
	got := Admit(testPolicy, nil, steal.Name, &steal)
	if len(got) != 1 || !strings.HasPrefix(got[0], `spec.resources.routes[0] ("r"): virtual_hosts[0].routes[0].direct_response.body.environment_variable names`) {
		t.Errorf("Admit = %q", got)
	}
	refusedCluster := config("c", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{raw(staticCluster("k", "169.254.169.254", 80, ""))}})
	route := config("r", examplev1.EnvoyResources{Routes: []runtime.RawExtension{raw(routeR)}})
	got = Admit(testPolicy, []Config{refusedCluster}, route.Name, &route)
	if want := []string{`spec.resources.routes[0] ("r"): cluster "k" does not exist`}; !reflect.DeepEqual(got, want) {
		t.Errorf("Admit beside a refused EnvoyConfig = %q, want %q", got, want)
	}
}

func TestFormattedEnv(t *testing.T) {
	tests := map[string][]string{
		"":                    nil,
		"%START_TIME%":        nil,
		"ENVIRONMENT(HOME)":   nil,
		"%ENVIRONMENT(HOME)%": {"HOME"},
		"a %ENVIRONMENT(A):3% b %ENVIRONMENT(B)%": {"A", "B"},
		"%Environment(home)%":                     {"home"},
		"%ENVIRONMENT(UNCLOSED":                   {"UNCLOSED"},
		"%%ENVIRONMENT(ESCAPED)%%":                {"ESCAPED"},
	}
	for in, want := range tests {
		if got := formattedEnv(in); !reflect.DeepEqual(got, want) {
			t.Errorf("formattedEnv(%q) = %q, want %q", in, got, want)
		}
	}
}

// The routes of theft that the admission and controller tests try are
// refused here, field by field, and by nothing else.
func TestAdmitRefusesExfiltrations(t *testing.T) {
	for _, x := range xdstest.Exfiltrations(testPolicy.Namespace) {
		t.Run(x.Name, func(t *testing.T) {
			c := config(x.Name, x.Resources)
			got := Admit(testPolicy, nil, c.Name, &c)
			if len(got) != len(x.Refused) {
				t.Fatalf("Admit = %q, want %d refusals", got, len(x.Refused))
			}
			for i, field := range x.Refused {
				if !strings.HasPrefix(got[i], field+" ") {
					t.Errorf("refusal %d = %s\nwant it to name %s", i, got[i], field)
				}
			}
		})
	}
}

// A resource is judged once per policy: the verdict is remembered by the
// decoded message, which resource.Decode shares between callers.
func TestVerdictsAreRemembered(t *testing.T) {
	c := verdictCache{resource.NewGenerations[verdictKey, []string](4, 4)}
	k, _ := resource.KindNamed("routes")
	m, _, err := resource.Decode(k, []byte(routeR))
	if err != nil {
		t.Fatal(err)
	}
	judged := 0
	judge := func() []string { judged++; return []string{"x"} }
	key := verdictKey{msg: m, typeURL: k.TypeURL, policy: testPolicy.identity()}
	for range 3 {
		if got := c.get(key, judge); len(got) != 1 {
			t.Fatalf("verdict %v", got)
		}
	}
	other := key
	other.policy = Policy{}.identity()
	c.get(other, judge)
	if judged != 2 {
		t.Errorf("judged %d times, want once per policy: 2", judged)
	}
}

// A refusal inside a cluster's bind config, which is walked with and
// without the rules of a destination, is said once.
func TestBindConfigRefusedOnce(t *testing.T) {
	c := config("a", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{{Raw: []byte(`{"name": "c", "connect_timeout": "1s",
		"upstream_bind_config": {"source_address": {"address": "0.0.0.0", "port_value": 0}, "socket_options": [{"level": 1, "name": 36, "int_value": 1}]}}`)}}})
	p, errs := parse(c)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := Policy{}.refusals(c.Name, p.resources)
	if len(got) != 1 || !strings.Contains(got[0], "upstream_bind_config.socket_options") {
		t.Errorf("refusals: %q", got)
	}
}
