package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/crdschema"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/podtemplate"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// The manifests below are what a user would write and apply: each invalid one
// must be refused by the API server (schema, CEL or admission), with an error
// that names the offending field, so that the user knows what to fix; each
// valid edge case must be admitted.

// resources maps the kinds under test to their resources.
var resources = map[string]schema.GroupVersionResource{
	"Envoy":       {Group: "example.com", Version: "v1", Resource: "envoys"},
	"EnvoyConfig": {Group: "example.com", Version: "v1", Resource: "envoyconfigs"},
	"Watcher":     {Group: "watch.my.domain", Version: "v1alpha1", Resource: "watchers"},
	"Foo":         {Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"},
	"PodSet":      {Group: "demo.k8s.io", Version: "v1alpha1", Resource: "podsets"},
	"FooBar":      {Group: "k8s.io", Version: "v1", Resource: "foobars"},
}

// head is the start of a manifest of kind named name; the case's own lines follow.
func head(kind, name string) string {
	gvr := resources[kind]
	return "apiVersion: " + gvr.GroupVersion().String() + "\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n"
}

// Heads of the kinds, each with a valid name.
var (
	envoyHead   = head("Envoy", "edge")
	configHead  = head("EnvoyConfig", "routes")
	watcherHead = head("Watcher", "logs")
	fooHead     = head("Foo", "web")
	podSetHead  = head("PodSet", "pods")
	fooBarHead  = head("FooBar", "run")
)

// A minimal valid Watcher spec, for cases that change one field.
const watcherContainer = `spec:
  container:
    name: tail
    image: busybox
`

var long = strings.Repeat

// manyTLSSecrets returns n items of spec.tlsSecrets, as YAML list lines.
func manyTLSSecrets(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: s%d, secretRef: web-tls}\n", i)
	}
	return b.String()
}

// withResources is an EnvoyConfig of fleet envoy that serves resources,
// given as the YAML lines under spec.resources (listeners:, clusters:, …).
func withResources(name, envoy, resources string) string {
	return head("EnvoyConfig", name) + "spec:\n  envoyRef: " + envoy + "\n  resources:\n" + resources
}

// Resources the cases of withResources are made of.
const (
	tcpToK     = `filter_chains: [{filters: [{name: tcp, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: k}}]}]`
	clusterK   = "    clusters:\n    - {name: k, type: EDS, connect_timeout: 1s, eds_cluster_config: {eds_config: {ads: {}}}}\n"
	hcmRouter  = `filter_chains: [{filters: [{name: hcm, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, stat_prefix: h, rds: {route_config_name: r, config_source: {ads: {}}}, http_filters: [%s]}}]}]`
	routerF    = `{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}`
	corsF      = `{name: envoy.filters.http.cors, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}`
	routeToK   = "    routes:\n    - {name: r, virtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: %s, route: {cluster: k%s}}]}]}\n"
	listenerOn = "    - {name: %s, address: {socket_address: {address: %q, port_value: %d%s}}, %s}\n"
)

// listenersOn is a listeners: list, each item a listener of name, address
// and port with a TCP proxy to cluster k.
func listenersOn(items ...string) string { return "    listeners:\n" + strings.Join(items, "") }

func tcpListener(name, address string, port int) string {
	return fmt.Sprintf(listenerOn, name, address, port, "", tcpToK)
}

// A sha256 digest, for image references.
var digest = "sha256:" + long("0123456789abcdef", 4)

// badInput is a manifest the API server must refuse.
type badInput struct {
	name     string
	manifest string
	// field is the offending field, as the error must name it.
	field string
	// why is a part of the message that says what is wrong with it.
	why string
	// webhook: a validating webhook refuses it, not the CRD's schema: the
	// EnvoyConfig validator (Envoy's rules for the resources it serves), or
	// the Watcher and PodSet validator (what the API server refuses in pods).
	webhook bool
}

var invalidManifests = []badInput{
	// Envoy: labels and annotations of the fleet's pods.
	{name: "envoy podLabels value over 63 characters", field: "spec.podLabels.team", why: "63", manifest: envoyHead + `spec:
  podLabels:
    team: ` + long("a", 64)},
	{name: "envoy podLabels value with a space", field: "spec.podLabels", why: "label value", manifest: envoyHead + `spec:
  podLabels:
    team: "a b"`},
	{name: "envoy podLabels value ending in a dash", field: "spec.podLabels", why: "label value", manifest: envoyHead + `spec:
  podLabels:
    team: a-`},
	{name: "envoy podLabels key with a space", field: "spec.podLabels", why: "label key", manifest: envoyHead + `spec:
  podLabels:
    "bad key": x`},
	{name: "envoy podLabels key with an invalid prefix", field: "spec.podLabels", why: "label key", manifest: envoyHead + `spec:
  podLabels:
    Bad_Prefix/team: x`},
	{name: "envoy podLabels key name over 63 characters", field: "spec.podLabels", why: "label key", manifest: envoyHead + `spec:
  podLabels:
    ` + long("k", 64) + `: x`},
	{name: "envoy podLabels empty key", field: "spec.podLabels", why: "label key", manifest: envoyHead + `spec:
  podLabels:
    "": x`},
	{name: "envoy podLabels sets the selector label", field: "spec.podLabels", why: "set by the operator", manifest: envoyHead + `spec:
  podLabels:
    app.kubernetes.io/instance: other`},
	{name: "envoy podAnnotations key with a space", field: "spec.podAnnotations", why: "annotation key", manifest: envoyHead + `spec:
  podAnnotations:
    "bad key": x`},
	{name: "envoy podAnnotations key with an empty name", field: "spec.podAnnotations", why: "annotation key", manifest: envoyHead + `spec:
  podAnnotations:
    example.com/: x`},
	{name: "envoy podAnnotations sets the bootstrap hash", field: "spec.podAnnotations", why: "set by the operator", manifest: envoyHead + `spec:
  podAnnotations:
    kube-envoy-controller.io/bootstrap-hash: x`},

	// Envoy: ports.
	{name: "envoy targetPort reserved for the admin", field: "spec.ports", why: "reserved", manifest: envoyHead + `spec:
  ports:
  - {name: admin, port: 80, targetPort: 19000}`},
	{name: "envoy port without targetPort on the ready port", field: "spec.ports", why: "reserved", manifest: envoyHead + `spec:
  ports:
  - {name: stats, port: 19001}`},
	{name: "envoy duplicate port numbers", field: "spec.ports", why: "port numbers must be unique", manifest: envoyHead + `spec:
  ports:
  - {name: a, port: 80, targetPort: 8080}
  - {name: b, port: 80, targetPort: 8081}`},
	{name: "envoy duplicate targetPorts", field: "spec.ports", why: "must be unique", manifest: envoyHead + `spec:
  ports:
  - {name: a, port: 80, targetPort: 8080}
  - {name: b, port: 81, targetPort: 8080}`},
	{name: "envoy port defaulting its targetPort onto another's", field: "spec.ports", why: "must be unique", manifest: envoyHead + `spec:
  ports:
  - {name: a, port: 80, targetPort: 8080}
  - {name: b, port: 8080}`},
	{name: "envoy duplicate port names", field: "spec.ports[1]", why: "Duplicate value", manifest: envoyHead + `spec:
  ports:
  - {name: a, port: 80}
  - {name: a, port: 81}`},
	{name: "envoy port 0", field: "spec.ports[0].port", why: "greater than or equal to 1", manifest: envoyHead + `spec:
  ports:
  - {name: http, port: 0}`},
	{name: "envoy port over 65535", field: "spec.ports[0].port", why: "less than or equal to 65535", manifest: envoyHead + `spec:
  ports:
  - {name: http, port: 65536}`},
	{name: "envoy targetPort over 65535", field: "spec.ports[0].targetPort", why: "less than or equal to 65535", manifest: envoyHead + `spec:
  ports:
  - {name: http, port: 80, targetPort: 70000}`},
	{name: "envoy port name in capitals", field: "spec.ports[0].name", why: "DNS-1035", manifest: envoyHead + `spec:
  ports:
  - {name: HTTP, port: 80}`},
	{name: "envoy port name over 15 characters", field: "spec.ports[0].name", why: "15", manifest: envoyHead + `spec:
  ports:
  - {name: ` + long("p", 16) + `, port: 80}`},
	{name: "envoy port without a name", field: "spec.ports[0].name", why: "Required", manifest: envoyHead + `spec:
  ports:
  - {port: 80}`},
	{name: "envoy port without a port", field: "spec.ports[0].port", why: "Required", manifest: envoyHead + `spec:
  ports:
  - {name: http}`},
	{name: "envoy port as a string", field: "spec.ports[0].port", why: "integer", manifest: envoyHead + `spec:
  ports:
  - {name: http, port: "eighty"}`},

	// Envoy: the rest of the spec.
	{name: "envoy negative replicas", field: "spec.replicas", why: "greater than or equal to 0", manifest: envoyHead + `spec:
  replicas: -1`},
	{name: "envoy unknown logLevel", field: "spec.logLevel", why: "Unsupported value", manifest: envoyHead + `spec:
  logLevel: verbose`},
	{name: "envoy ExternalName serviceType", field: "spec.serviceType", why: "Unsupported value", manifest: envoyHead + `spec:
  serviceType: ExternalName`},
	{name: "envoy spec.name not a DNS-1035 label", field: "spec.name", why: "DNS-1035", manifest: envoyHead + `spec:
  name: Bad_Name`},
	{name: "envoy spec.name over 63 characters", field: "spec.name", why: "63", manifest: envoyHead + `spec:
  name: ` + long("n", 64)},
	{name: "envoy configMapName not a subdomain", field: "spec.configMapName", why: "DNS-1123 subdomain", manifest: envoyHead + `spec:
  configMapName: Bad_Name`},
	{name: "envoy empty image", field: "spec.image", why: "at least 1", manifest: envoyHead + `spec:
  image: ""`},
	{name: "envoy image with surrounding spaces", field: "spec.image", why: "whitespace", manifest: envoyHead + `spec:
  image: " envoyproxy/envoy:v1.40.0"`},
	{name: "envoy xds host not a host", field: "spec.xds.host", why: "DNS name or an IP address", manifest: envoyHead + `spec:
  xds: {host: "not a host", port: 18000}`},
	{name: "envoy xds without host", field: "spec.xds.host", why: "Required", manifest: envoyHead + `spec:
  xds: {port: 18000}`},
	{name: "envoy xds port 0", field: "spec.xds.port", why: "greater than or equal to 1", manifest: envoyHead + `spec:
  xds: {host: xds.example.com, port: 0}`},
	{name: "envoy xds cluster name with a space", field: "spec.xds.name", why: "should match", manifest: envoyHead + `spec:
  xds: {name: "xds cluster", host: xds.example.com, port: 18000}`},
	{name: "envoy resources quantity not a quantity", field: "spec.resources.limits", why: "should match", manifest: envoyHead + `spec:
  resources:
    limits: {cpu: lots}`},
	{name: "envoy resources requests above limits", field: "spec.resources", why: "requests must not exceed limits", manifest: envoyHead + `spec:
  resources:
    requests: {memory: 2Gi}
    limits: {memory: 1Gi}`},
	{name: "envoy resources negative request", field: "spec.resources", why: "must not be negative", manifest: envoyHead + `spec:
  resources:
    requests: {cpu: "-100m"}`},
	{name: "envoy resources unqualified extended resource", field: "spec.resources", why: "resource name", manifest: envoyHead + `spec:
  resources:
    limits: {gpu: 1}`},
	{name: "envoy resources extended resource not a qualified name", field: "spec.resources", why: "qualified name", manifest: envoyHead + `spec:
  resources:
    limits: {"0/": 1}`},
	{name: "envoy resources claims", field: "spec.resources", why: "claims", manifest: envoyHead + `spec:
  resources:
    claims: [{name: gpu}]`},
	{name: "envoy image with a space inside", field: "spec.image", why: "image reference", manifest: envoyHead + `spec:
  image: "envoyproxy/envoy v1.40.0"`},
	{name: "envoy image repository in capitals", field: "spec.image", why: "image reference", manifest: envoyHead + `spec:
  image: envoyproxy/Envoy:v1.40.0`},
	{name: "envoy image with a short digest", field: "spec.image", why: "image reference", manifest: envoyHead + `spec:
  image: envoyproxy/envoy@sha256:abc`},
	{name: "envoy image of 64 hex digits", field: "spec.image", why: "image reference", manifest: envoyHead + `spec:
  image: "` + long("a", 64) + `"`},
	{name: "envoy image tag over 128 characters", field: "spec.image", why: "image reference", manifest: envoyHead + `spec:
  image: envoyproxy/envoy:` + long("t", 129)},
	{name: "envoy image repository over 255 characters", field: "spec.image", why: "255", manifest: envoyHead + `spec:
  image: registry.example.com/` + long("r", 250) + `:v1`},
	{name: "envoy resources extended resource request without limit", field: "spec.resources", why: "need a limit", manifest: envoyHead + `spec:
  resources:
    requests: {example.com/device: 1}`},
	{name: "envoy resources hugepages request without limit", field: "spec.resources", why: "need a limit", manifest: envoyHead + `spec:
  resources:
    requests: {hugepages-2Mi: 2Mi, memory: 1Gi}`},
	{name: "envoy resources hugepages without cpu or memory", field: "spec.resources", why: "hugepages need a cpu or memory", manifest: envoyHead + `spec:
  resources:
    limits: {hugepages-2Mi: 2Mi}`},
	{name: "envoy resources hugepages of no page size", field: "spec.resources", why: "page size", manifest: envoyHead + `spec:
  resources:
    limits: {hugepages-big: 2Mi, memory: 1Gi}`},
	{name: "envoy resources extended resource in the kubernetes.io domain", field: "spec.resources", why: "kubernetes.io domain", manifest: envoyHead + `spec:
  resources:
    limits: {kubernetes.io/gpu: 1}`},
	{name: "envoy port name with two dashes in a row", field: "spec.ports[0].name", why: "IANA_SVC_NAME", manifest: envoyHead + `spec:
  ports:
  - {name: a--b, port: 80}`},
	{name: "envoy unknown field", field: "spec.replica", why: "unknown field", manifest: envoyHead + `spec:
  replica: 3`},
	{name: "envoy name over 63 characters", field: "metadata.name", why: "63", manifest: head("Envoy", long("e", 64))},
	{name: "envoy name with a dot and no spec.name", field: "metadata.name", why: "DNS-1035", manifest: head("Envoy", "edge.proxy")},
	{name: "envoy name in capitals", field: "metadata.name", why: "subdomain", manifest: head("Envoy", "Edge")},

	// EnvoyConfig: the Envoy it configures.
	{name: "envoyconfig envoyRef with capitals and underscore", field: "spec.envoyRef", why: "DNS-1123", manifest: configHead + `spec:
  envoyRef: Bad_Ref`},
	{name: "envoyconfig empty envoyRef", field: "spec.envoyRef", why: "at least 1", manifest: configHead + `spec:
  envoyRef: ""`},
	{name: "envoyconfig without envoyRef", field: "spec.envoyRef", why: "Required", manifest: configHead + `spec: {}`},
	{name: "envoyconfig envoyRef over 63 characters", field: "spec.envoyRef", why: "63", manifest: configHead + `spec:
  envoyRef: ` + long("e", 64)},
	{name: "envoyconfig envoyRef with a slash", field: "spec.envoyRef", why: "DNS-1123", manifest: configHead + `spec:
  envoyRef: other/edge`},
	{name: "envoyconfig envoyRef starting with a dash", field: "spec.envoyRef", why: "DNS-1123", manifest: configHead + `spec:
  envoyRef: -edge`},
	{name: "envoyconfig envoyRef as a number", field: "spec.envoyRef", why: "string", manifest: configHead + `spec:
  envoyRef: 42`},
	{name: "envoyconfig without spec", field: "spec", why: "Required", manifest: configHead},

	// EnvoyConfig: the Secrets it serves over SDS.
	{name: "envoyconfig tlsSecrets name with a space", field: "spec.tlsSecrets[0].name", why: "SDS secret name", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
  - {name: "server cert", secretRef: web-tls}`},
	{name: "envoyconfig tlsSecrets empty name", field: "spec.tlsSecrets[0].name", why: "at least 1", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
  - {name: "", secretRef: web-tls}`},
	{name: "envoyconfig tlsSecrets without name", field: "spec.tlsSecrets[0].name", why: "Required", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
  - {secretRef: web-tls}`},
	{name: "envoyconfig tlsSecrets name over 253 characters", field: "spec.tlsSecrets[0].name", why: "253", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
  - {name: ` + long("n", 254) + `, secretRef: web-tls}`},
	{name: "envoyconfig tlsSecrets secretRef in capitals", field: "spec.tlsSecrets[0].secretRef", why: "name of a Secret", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
  - {name: server-cert, secretRef: Web_TLS}`},
	{name: "envoyconfig tlsSecrets secretRef in another namespace", field: "spec.tlsSecrets[0].secretRef", why: "name of a Secret", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
  - {name: server-cert, secretRef: other/web-tls}`},
	{name: "envoyconfig tlsSecrets without secretRef", field: "spec.tlsSecrets[0].secretRef", why: "Required", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
  - {name: server-cert}`},
	{name: "envoyconfig tlsSecrets duplicate name", field: "spec.tlsSecrets[1]", why: "Duplicate value", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
  - {name: server-cert, secretRef: web-tls}
  - {name: server-cert, secretRef: other-tls}`},
	{name: "envoyconfig tlsSecrets over 256", field: "spec.tlsSecrets", why: "256", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
` + manyTLSSecrets(257)},
	{name: "envoyconfig tlsSecrets unknown field", field: "spec.tlsSecrets[0].secretName", why: "unknown field", manifest: configHead + `spec:
  envoyRef: edge
  tlsSecrets:
  - {name: server-cert, secretName: web-tls}`},

	// EnvoyConfig: the Services whose endpoints it serves.
	{name: "envoyconfig serviceEndpoints service not a DNS-1035 label", field: "spec.serviceEndpoints[0].service", why: "DNS-1035", manifest: configHead + `spec:
  envoyRef: edge
  serviceEndpoints:
  - {cluster: k, service: 1web, port: http}`},
	{name: "envoyconfig serviceEndpoints port name with an underscore", field: "spec.serviceEndpoints[0].port", why: "port of the Service", manifest: configHead + `spec:
  envoyRef: edge
  serviceEndpoints:
  - {cluster: k, service: web, port: http_port}`},
	{name: "envoyconfig serviceEndpoints port 0", field: "spec.serviceEndpoints[0].port", why: "port number from 1 to 65535", manifest: configHead + `spec:
  envoyRef: edge
  serviceEndpoints:
  - {cluster: k, service: web, port: 0}`},
	{name: "envoyconfig serviceEndpoints port over 65535", field: "spec.serviceEndpoints[0].port", why: "port number from 1 to 65535", manifest: configHead + `spec:
  envoyRef: edge
  serviceEndpoints:
  - {cluster: k, service: web, port: 70000}`},

	// EnvoyConfig: what Envoy refuses when it loads the resources, which
	// the validating webhook refuses (internal/xds/resource/envoyrules_test.go has
	// Envoy's message for each).
	{name: "envoyconfig two listeners on one address", webhook: true, field: `spec.resources.listeners[1] ("b")`, why: "0.0.0.0:8080 is also the address of listener", manifest: withResources("routes", "edge",
		listenersOn(tcpListener("a", "0.0.0.0", 8080), tcpListener("b", "0.0.0.0", 8080))+clusterK)},
	{name: "envoyconfig listener on a host name", webhook: true, field: `spec.resources.listeners[0] ("a"): address.socket_address.address`, why: "not an IP address", manifest: withResources("routes", "edge",
		listenersOn(tcpListener("a", "envoy.example.com", 8080))+clusterK)},
	{name: "envoyconfig listener on the admin interface's port", webhook: true, field: `spec.resources.listeners[0] ("a"): address.socket_address`, why: "admin interface", manifest: withResources("routes", "edge",
		listenersOn(tcpListener("a", "0.0.0.0", 19000))+clusterK)},
	{name: "envoyconfig router not the last HTTP filter", webhook: true, field: `spec.resources.listeners[0] ("a"): filter_chains[0].filters[0].typed_config(HttpConnectionManager).http_filters[0]`, why: "must be the last filter", manifest: withResources("routes", "edge",
		listenersOn(fmt.Sprintf(listenerOn, "a", "0.0.0.0", 8080, "", fmt.Sprintf(hcmRouter, routerF+", "+corsF)))+fmt.Sprintf(routeToK, "{prefix: /}", "")+clusterK)},
	{name: "envoyconfig connection manager as a listener filter", webhook: true, field: `spec.resources.listeners[0] ("a"): listener_filters[0].typed_config`, why: "not a listener filter", manifest: withResources("routes", "edge",
		"    listeners:\n    - {name: a, address: {socket_address: {address: 0.0.0.0, port_value: 8080}}, listener_filters: [{name: hcm, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, stat_prefix: h, rds: {route_config_name: r, config_source: {ads: {}}}}}], "+tcpToK+"}\n"+clusterK)},
	{name: "envoyconfig upstream TLS context in a listener", webhook: true, field: `spec.resources.listeners[0] ("a"): filter_chains[0].transport_socket.typed_config`, why: "not a downstream transport socket", manifest: withResources("routes", "edge",
		"    listeners:\n    - {name: a, address: {socket_address: {address: 0.0.0.0, port_value: 8443}}, filter_chains: [{transport_socket: {name: tls, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext}}, filters: [{name: tcp, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: k}}]}]}\n"+clusterK)},
	{name: "envoyconfig downstream TLS context in a cluster", webhook: true, field: `spec.resources.clusters[0] ("k"): transport_socket.typed_config`, why: "not an upstream transport socket", manifest: withResources("routes", "edge",
		"    clusters:\n    - {name: k, type: EDS, eds_cluster_config: {eds_config: {ads: {}}}, transport_socket: {name: tls, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext}}}\n")},
	{name: "envoyconfig EDS cluster without eds_cluster_config", webhook: true, field: `spec.resources.clusters[0] ("k"): eds_cluster_config`, why: "needs eds_cluster_config", manifest: withResources("routes", "edge",
		"    clusters:\n    - {name: k, type: EDS, connect_timeout: 1s}\n")},
	{name: "envoyconfig STATIC cluster with eds_cluster_config", webhook: true, field: `spec.resources.clusters[0] ("k"): eds_cluster_config`, why: "only an EDS cluster", manifest: withResources("routes", "edge",
		"    clusters:\n    - {name: k, type: STATIC, eds_cluster_config: {eds_config: {ads: {}}}}\n")},
	{name: "envoyconfig ORIGINAL_DST cluster with round robin", webhook: true, field: `spec.resources.clusters[0] ("k"): lb_policy`, why: "CLUSTER_PROVIDED", manifest: withResources("routes", "edge",
		"    clusters:\n    - {name: k, type: ORIGINAL_DST, lb_policy: ROUND_ROBIN}\n")},
	{name: "envoyconfig STATIC cluster on a host name", webhook: true, field: `spec.resources.clusters[0] ("k"): load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address`, why: "not an IP address", manifest: withResources("routes", "edge",
		"    clusters:\n    - {name: k, type: STATIC, load_assignment: {cluster_name: k, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: web.default.svc, port_value: 80}}}}]}]}}\n")},
	{name: "envoyconfig maglev table size not prime", webhook: true, field: `spec.resources.clusters[0] ("k"): maglev_lb_config.table_size`, why: "not a prime number", manifest: withResources("routes", "edge",
		"    clusters:\n    - {name: k, type: EDS, eds_cluster_config: {eds_config: {ads: {}}}, lb_policy: MAGLEV, maglev_lb_config: {table_size: 1000}}\n")},
	{name: "envoyconfig negative route timeout", webhook: true, field: `spec.resources.routes[0] ("r"): virtual_hosts[0].routes[0].route.timeout`, why: "must not be negative", manifest: withResources("routes", "edge",
		fmt.Sprintf(routeToK, "{prefix: /}", ", timeout: -1s")+clusterK)},
	{name: "envoyconfig regex RE2 cannot parse", webhook: true, field: `spec.resources.routes[0] ("r"): virtual_hosts[0].routes[0].match.safe_regex.regex`, why: "not a valid RE2 regular expression", manifest: withResources("routes", "edge",
		fmt.Sprintf(routeToK, `{safe_regex: {regex: "/(+x"}}`, "")+clusterK)},
	{name: "envoyconfig regex over Envoy's program size", webhook: true, field: `spec.resources.routes[0] ("r"): virtual_hosts[0].routes[0].match.safe_regex.regex`, why: "re2.max_program_size", manifest: withResources("routes", "edge",
		fmt.Sprintf(routeToK, `{safe_regex: {regex: "^/users/[a-z0-9-]{1,64}$"}}`, "")+clusterK)},
	{name: "envoyconfig duplicate domain", webhook: true, field: `spec.resources.routes[0] ("r"): virtual_hosts[1].domains[0]`, why: "domains must be unique", manifest: withResources("routes", "edge",
		"    routes:\n    - {name: r, virtual_hosts: [{name: a, domains: [web.example.com]}, {name: b, domains: [WEB.example.com]}]}\n")},
	{name: "envoyconfig direct response body over 4 KiB", webhook: true, field: `spec.resources.routes[0] ("r"): virtual_hosts[0].routes[0].direct_response.body`, why: "max_direct_response_body_size_bytes is 4096", manifest: withResources("routes", "edge",
		"    routes:\n    - {name: r, virtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: /}, direct_response: {status: 200, body: {inline_string: "+long("x", 5000)+"}}}]}]}\n")},
	{name: "envoyconfig EDS endpoint on a host name", webhook: true, field: `spec.resources.endpoints[0] ("k"): endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address`, why: "not an IP address", manifest: withResources("routes", "edge",
		"    endpoints:\n    - {cluster_name: k, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: web.default.svc, port_value: 80}}}}]}]}\n")},

	// Watcher: its selector.
	{name: "watcher selector operator Bogus", field: "spec.selector.matchExpressions", why: "In, NotIn, Exists or DoesNotExist", manifest: watcherHead + watcherContainer + `  selector:
    matchExpressions:
    - {key: app, operator: Bogus, values: [web]}`},
	{name: "watcher selector In without values", field: "spec.selector.matchExpressions", why: "values", manifest: watcherHead + watcherContainer + `  selector:
    matchExpressions:
    - {key: app, operator: In}`},
	{name: "watcher selector Exists with values", field: "spec.selector.matchExpressions", why: "values", manifest: watcherHead + watcherContainer + `  selector:
    matchExpressions:
    - {key: app, operator: Exists, values: [web]}`},
	{name: "watcher selector expression key empty", field: "spec.selector.matchExpressions", why: "label key", manifest: watcherHead + watcherContainer + `  selector:
    matchExpressions:
    - {key: "", operator: Exists}`},
	{name: "watcher selector matchLabels key invalid", field: "spec.selector.matchLabels", why: "label key", manifest: watcherHead + watcherContainer + `  selector:
    matchLabels: {"bad key": web}`},
	{name: "watcher selector matchLabels value over 63 characters", field: "spec.selector.matchLabels", why: "label value", manifest: watcherHead + watcherContainer + `  selector:
    matchLabels: {app: ` + long("v", 64) + `}`},
	{name: "watcher selector expression without operator", field: "spec.selector.matchExpressions[0].operator", why: "Required", manifest: watcherHead + watcherContainer + `  selector:
    matchExpressions:
    - {key: app}`},

	// Watcher: its container, volume and pull secret.
	{name: "watcher container name Bad_Name", field: "spec.container.name", why: "DNS-1123 label", manifest: watcherHead + `spec:
  container: {name: Bad_Name, image: busybox}`},
	{name: "watcher container name over 63 characters", field: "spec.container.name", why: "DNS-1123 label", manifest: watcherHead + `spec:
  container: {name: ` + long("c", 64) + `, image: busybox}`},
	{name: "watcher container without name", field: "spec.container.name", why: "Required", manifest: watcherHead + `spec:
  container: {image: busybox}`},
	{name: "watcher container without image", field: "spec.container.image", why: "required", manifest: watcherHead + `spec:
  container: {name: tail}`},
	{name: "watcher container image with surrounding spaces", field: "spec.container.image", why: "whitespace", manifest: watcherHead + `spec:
  container: {name: tail, image: "busybox "}`},
	{name: "watcher container port 0", field: "spec.container.ports", why: "containerPort", manifest: watcherHead + `spec:
  container:
    name: tail
    image: busybox
    ports: [{containerPort: 0}]`},
	{name: "watcher container port over 65535", field: "spec.container.ports", why: "containerPort", manifest: watcherHead + `spec:
  container:
    name: tail
    image: busybox
    ports: [{containerPort: 65536}]`},
	{name: "watcher container resources requests above limits", field: "spec.container.resources", why: "requests must not exceed limits", manifest: watcherHead + `spec:
  container:
    name: tail
    image: busybox
    resources:
      requests: {cpu: "2"}
      limits: {cpu: 500m}`},
	{name: "watcher container resources negative limit", field: "spec.container.resources", why: "must not be negative", manifest: watcherHead + `spec:
  container:
    name: tail
    image: busybox
    resources:
      limits: {memory: "-1Gi"}`},
	{name: "watcher container extended resource not a qualified name", field: "spec.container.resources.requests", why: "qualified name", manifest: watcherHead + `spec:
  container:
    name: tail
    image: busybox
    resources:
      requests: {"-bad/x": 1}`},
	{name: "watcher container image with a space inside", field: "spec.container.image", why: "image reference", manifest: watcherHead + `spec:
  container: {name: tail, image: "busy box"}`},
	{name: "watcher container image repository in capitals", field: "spec.container.image", why: "image reference", manifest: watcherHead + `spec:
  container: {name: tail, image: library/BusyBox}`},
	{name: "watcher volume with two sources", field: "spec.volume", why: "exactly one volume source", manifest: watcherHead + watcherContainer + `  volume: {name: logs, emptyDir: {}, configMap: {name: logs}}`},
	{name: "watcher volume without a source", field: "spec.volume", why: "exactly one volume source", manifest: watcherHead + watcherContainer + `  volume: {name: logs}`},
	{name: "watcher configMap volume without a name", field: "spec.volume.configMap.name", why: "required", manifest: watcherHead + watcherContainer + `  volume: {name: logs, configMap: {}}`},
	{name: "watcher secret volume without a name", field: "spec.volume.secret.secretName", why: "required", manifest: watcherHead + watcherContainer + `  volume: {name: logs, secret: {}}`},
	{name: "watcher volume name Bad_Vol", field: "spec.volume.name", why: "DNS-1123 label", manifest: watcherHead + watcherContainer + `  volume: {name: Bad_Vol, emptyDir: {}}`},
	{name: "watcher imagePullSecrets name invalid", field: "spec.imagePullSecrets.name", why: "DNS-1123 subdomain", manifest: watcherHead + watcherContainer + `  imagePullSecrets: {name: Bad_Secret}`},
	{name: "watcher without container", field: "spec.container", why: "Required", manifest: watcherHead + `spec: {}`},
	{name: "watcher configData key with a slash", field: "spec.configData", why: "keys must consist of", manifest: watcherHead + watcherContainer + `  configData: {"a/b": x}`},
	{name: "watcher configData key ..", field: "spec.configData", why: "must not be '.' or start with '..'", manifest: watcherHead + watcherContainer + `  configData: {"..": x}`},
	{name: "watcher configBinaryData key .", field: "spec.configBinaryData", why: "must not be '.' or start with '..'", manifest: watcherHead + watcherContainer + `  configBinaryData: {".": eA==}`},
	{name: "watcher configData and configBinaryData share a key", field: "spec.configData", why: "share a key", manifest: watcherHead + watcherContainer + `  configData: {a: x}
  configBinaryData: {a: eA==}`},
	{name: "watcher unknown field", field: "spec.containers", why: "unknown field", manifest: watcherHead + watcherContainer + `  containers: []`},
	{name: "watcher name of 100 characters", field: "metadata.name", why: "63", manifest: head("Watcher", long("w", 100)) + watcherContainer},
	{name: "watcher name of 64 characters", field: "metadata.name", why: "63", manifest: head("Watcher", long("w", 64)) + watcherContainer},

	// Foo.
	{name: "foo deploymentName Bad_Name", field: "spec.deploymentName", why: "DNS-1123 subdomain", manifest: fooHead + `spec:
  deploymentName: Bad_Name`},
	{name: "foo without deploymentName", field: "spec.deploymentName", why: "Required", manifest: fooHead + `spec:
  replicas: 1`},
	{name: "foo empty deploymentName", field: "spec.deploymentName", why: "at least 1", manifest: fooHead + `spec:
  deploymentName: ""`},
	{name: "foo deploymentName over 253 characters", field: "spec.deploymentName", why: "253", manifest: fooHead + `spec:
  deploymentName: ` + long("d", 254)},
	{name: "foo replicas 0", field: "spec.replicas", why: "greater than or equal to 1", manifest: fooHead + `spec:
  deploymentName: web
  replicas: 0`},
	{name: "foo replicas 11", field: "spec.replicas", why: "less than or equal to 10", manifest: fooHead + `spec:
  deploymentName: web
  replicas: 11`},
	{name: "foo replicas as a string", field: "spec.replicas", why: "integer", manifest: fooHead + `spec:
  deploymentName: web
  replicas: three`},
	{name: "foo name over 63 characters", field: "metadata.name", why: "63", manifest: head("Foo", long("f", 64)) + `spec:
  deploymentName: web`},
	{name: "foo unknown field", field: "spec.deployment", why: "unknown field", manifest: fooHead + `spec:
  deploymentName: web
  deployment: web`},

	// PodSet.
	{name: "podset negative replicas", field: "spec.replicas", why: "greater than or equal to 0", manifest: podSetHead + `spec:
  replicas: -1`},
	{name: "podset replicas as a string", field: "spec.replicas", why: "integer", manifest: podSetHead + `spec:
  replicas: two`},
	{name: "podset template without containers", field: "spec.template.spec.containers", why: "Required", manifest: podSetHead + `spec:
  template:
    spec: {}`},
	{name: "podset template container name over 63 characters", field: "spec.template.spec.containers", why: "DNS-1123 label", manifest: podSetHead + `spec:
  template:
    spec:
      containers: [{name: ` + long("c", 64) + `, image: busybox}]`},
	{name: "podset template duplicate container names", field: "spec.template.spec.containers[1]", why: "Duplicate value", manifest: podSetHead + `spec:
  template:
    spec:
      containers: [{name: a, image: busybox}, {name: a, image: busybox}]`},
	{name: "podset template label key invalid", field: "spec.template.metadata.labels", why: "label key", manifest: podSetHead + `spec:
  template:
    metadata:
      labels: {"bad key": x}
    spec:
      containers: [{name: a, image: busybox}]`},
	{name: "podset template label value over 63 characters", field: "spec.template.metadata.labels", why: "label value", manifest: podSetHead + `spec:
  template:
    metadata:
      labels: {app: ` + long("v", 64) + `}
    spec:
      containers: [{name: a, image: busybox}]`},
	{name: "podset template annotation key invalid", field: "spec.template.metadata.annotations", why: "annotation key", manifest: podSetHead + `spec:
  template:
    metadata:
      annotations: {"bad key": x}
    spec:
      containers: [{name: a, image: busybox}]`},
	{name: "podset template restartPolicy unknown", field: "spec.template.spec.restartPolicy", why: "Always, OnFailure or Never", manifest: podSetHead + `spec:
  template:
    spec:
      restartPolicy: Sometimes
      containers: [{name: a, image: busybox}]`},
	{name: "podset name over 63 characters", field: "metadata.name", why: "63", manifest: head("PodSet", long("p", 64)) + `spec:
  replicas: 1`},
	{name: "podset unknown field", field: "spec.replica", why: "unknown field", manifest: podSetHead + `spec:
  replica: 1`},

	// FooBar.
	{name: "foobar empty command", field: "spec.command", why: "at least 1", manifest: fooBarHead + `spec:
  command: ""`},
	{name: "foobar without command", field: "spec.command", why: "Required", manifest: fooBarHead + `spec:
  foo: x`},
	{name: "foobar empty image", field: "spec.image", why: "at least 1", manifest: fooBarHead + `spec:
  command: "true"
  image: ""`},
	{name: "foobar image with surrounding spaces", field: "spec.image", why: "whitespace", manifest: fooBarHead + `spec:
  command: "true"
  image: "busybox "`},
	{name: "foobar image with a space inside", field: "spec.image", why: "image reference", manifest: fooBarHead + `spec:
  command: "true"
  image: "busy box"`},
	{name: "foobar image with an empty tag", field: "spec.image", why: "image reference", manifest: fooBarHead + `spec:
  command: "true"
  image: "busybox:"`},
	{name: "foobar image with a tag starting with a dot", field: "spec.image", why: "image reference", manifest: fooBarHead + `spec:
  command: "true"
  image: busybox:.1`},
	{name: "foobar foo as a number", field: "spec.foo", why: "string", manifest: fooBarHead + `spec:
  command: "true"
  foo: 42`},
	{name: "foobar name over 52 characters", field: "metadata.name", why: "52", manifest: head("FooBar", long("r", 53)) + `spec:
  command: "true"`},
	{name: "foobar name in capitals", field: "metadata.name", why: "subdomain", manifest: head("FooBar", "Run") + `spec:
  command: "true"`},
	{name: "foobar unknown field", field: "spec.cmd", why: "unknown field", manifest: fooBarHead + `spec:
  command: "true"
  cmd: "true"`},
	{name: "foobar without spec", field: "spec", why: "Required", manifest: fooBarHead},

	// Envoy: running fleets in production.
	{name: "envoy negative drain", field: "spec.drainSeconds", why: "greater than or equal to 0", manifest: envoyHead + `spec:
  drainSeconds: -1`},
	{name: "envoy drain over an hour", field: "spec.drainSeconds", why: "less than or equal to 3600", manifest: envoyHead + `spec:
  drainSeconds: 3601`},
	{name: "envoy grace period shorter than the default drain", field: "spec.terminationGracePeriodSeconds", why: "drainSeconds + 5", manifest: envoyHead + `spec:
  terminationGracePeriodSeconds: 30`},
	{name: "envoy grace period shorter than the drain", field: "spec.terminationGracePeriodSeconds", why: "drainSeconds + 5", manifest: envoyHead + `spec:
  drainSeconds: 100
  terminationGracePeriodSeconds: 104`},
	{name: "envoy grace period of 0", field: "spec.terminationGracePeriodSeconds", why: "greater than or equal to 1", manifest: envoyHead + `spec:
  drainSeconds: 0
  terminationGracePeriodSeconds: 0`},
	{name: "envoy budget with both bounds", field: "spec.podDisruptionBudget", why: "not both", manifest: envoyHead + `spec:
  podDisruptionBudget: {maxUnavailable: 1, minAvailable: 1}`},
	{name: "envoy budget over 100%", field: "spec.podDisruptionBudget.maxUnavailable", why: "percentage", manifest: envoyHead + `spec:
  podDisruptionBudget: {maxUnavailable: "150%"}`},
	{name: "envoy budget negative", field: "spec.podDisruptionBudget.minAvailable", why: "0 or more", manifest: envoyHead + `spec:
  podDisruptionBudget: {minAvailable: -1}`},
	{name: "envoy budget not a number", field: "spec.podDisruptionBudget.minAvailable", why: "percentage", manifest: envoyHead + `spec:
  podDisruptionBudget: {minAvailable: half}`},
	{name: "envoy rollout step of both kinds", field: "spec.configRollout.steps[0]", why: "exactly one of proxies and percent", manifest: envoyHead + `spec:
  configRollout: {steps: [{proxies: 1, percent: 10}]}`},
	{name: "envoy rollout step of neither kind", field: "spec.configRollout.steps[0]", why: "exactly one of proxies and percent", manifest: envoyHead + `spec:
  configRollout: {steps: [{}]}`},
	{name: "envoy rollout step over 100%", field: "spec.configRollout.steps[0].percent", why: "100", manifest: envoyHead + `spec:
  configRollout: {steps: [{percent: 150}]}`},
	{name: "envoy rollout without steps", field: "spec.configRollout.steps", why: "1 item", manifest: envoyHead + `spec:
  configRollout: {steps: []}`},
	{name: "envoy rollout negative bake", field: "spec.configRollout.bakeSeconds", why: "0", manifest: envoyHead + `spec:
  configRollout: {steps: [{proxies: 1}], bakeSeconds: -1}`},
	{name: "envoy rollout analysis without requests", field: "spec.configRollout.analysis.minRequests", why: "1", manifest: envoyHead + `spec:
  configRollout: {steps: [{proxies: 1}], analysis: {minRequests: 0}}`},
	{name: "envoy rollout analysis ceiling over 100%", field: "spec.configRollout.analysis.resets.maxPercent", why: "100", manifest: envoyHead + `spec:
  configRollout: {steps: [{proxies: 1}], analysis: {resets: {maxPercent: 150}}}`},
	{name: "envoy rollout analysis bound below the baseline's share", field: "spec.configRollout.analysis.serverErrors.maxToBaselinePercent",
		why: "maxToBaselinePercent must be 0 (no bound) or from 100", manifest: envoyHead + `spec:
  configRollout: {steps: [{proxies: 1}], analysis: {serverErrors: {maxToBaselinePercent: 50}}}`},
	{name: "envoy rollout analysis bound below the baseline's p99", field: "spec.configRollout.analysis.latencyP99.maxToBaselinePercent",
		why: "maxToBaselinePercent must be 0 (no bound) or from 100", manifest: envoyHead + `spec:
  configRollout: {steps: [{proxies: 1}], analysis: {latencyP99: {maxToBaselinePercent: 99}}}`},
	{name: "envoy rollout analysis negative p99 ceiling", field: "spec.configRollout.analysis.latencyP99.maxMilliseconds", why: "0", manifest: envoyHead + `spec:
  configRollout: {steps: [{proxies: 1}], analysis: {latencyP99: {maxMilliseconds: -1}}}`},
	{name: "envoy autoscaling without a CPU request", field: "spec.autoscaling", why: "resources.requests.cpu", manifest: envoyHead + `spec:
  autoscaling: {maxReplicas: 4}`},
	{name: "envoy autoscaling without maxReplicas", field: "spec.autoscaling.maxReplicas", why: "Required", manifest: envoyHead + `spec:
  resources: {requests: {cpu: 100m}}
  autoscaling: {minReplicas: 2}`},
	{name: "envoy autoscaling min above max", field: "spec.autoscaling", why: "minReplicas must not exceed maxReplicas", manifest: envoyHead + `spec:
  resources: {requests: {cpu: 100m}}
  autoscaling: {minReplicas: 5, maxReplicas: 4}`},
	{name: "envoy autoscaling to zero", field: "spec.autoscaling.minReplicas", why: "greater than or equal to 1", manifest: envoyHead + `spec:
  resources: {requests: {cpu: 100m}}
  autoscaling: {minReplicas: 0, maxReplicas: 4}`},
	{name: "envoy autoscaling CPU target of 0", field: "spec.autoscaling.targetCPUUtilizationPercentage", why: "greater than or equal to 1", manifest: envoyHead + `spec:
  resources: {requests: {cpu: 100m}}
  autoscaling: {maxReplicas: 4, targetCPUUtilizationPercentage: 0}`},
	{name: "envoy spread with an unknown action", field: "spec.topologySpreadConstraints[0].whenUnsatisfiable", why: "Unsupported value", manifest: envoyHead + `spec:
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: Sometimes}`},
	{name: "envoy spread with a skew of 0", field: "spec.topologySpreadConstraints[0].maxSkew", why: "greater than or equal to 1", manifest: envoyHead + `spec:
  topologySpreadConstraints:
  - {maxSkew: 0, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}`},
	{name: "envoy spread over a key that is no label key", field: "spec.topologySpreadConstraints[0].topologyKey", why: "label key", manifest: envoyHead + `spec:
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: "not a key", whenUnsatisfiable: ScheduleAnyway}`},
	{name: "envoy spread twice over one key", field: "spec.topologySpreadConstraints", why: "once", manifest: envoyHead + `spec:
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}`},
	{name: "envoy spread minDomains without DoNotSchedule", field: "spec.topologySpreadConstraints[0].minDomains", why: "DoNotSchedule", manifest: envoyHead + `spec:
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}`},
	{name: "envoy spread with a label selector", field: "spec.topologySpreadConstraints[0].labelSelector", why: "unknown field", manifest: envoyHead + `spec:
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {a: b}}}`},

	// Watcher: native sidecars.
	{name: "watcher container with a restartPolicy", field: "spec.container.restartPolicy", why: "spec.nativeSidecar", manifest: watcherHead + watcherContainer + `    restartPolicy: Always`},
	{name: "watcher nativeSidecar not a boolean", field: "spec.nativeSidecar", why: "boolean", manifest: watcherHead + watcherContainer + `  nativeSidecar: "yes"`},

	// Pod content that the API server refuses in every pod, refused by the
	// Watcher, PodSet and Envoy validating webhook (package podtemplate).
	// Label and annotation keys and values.
	{name: "podset template label key name part over 63 characters", webhook: true, field: "spec.template.metadata.labels", why: "name part must be no more than 63", manifest: podSetTemplate(`
    metadata:
      labels: {example.com/`+long("n", 64)+`: x}`, "")},
	{name: "podset template label key prefix not a DNS subdomain", webhook: true, field: "spec.template.metadata.labels", why: "prefix part a lowercase RFC 1123 subdomain", manifest: podSetTemplate(`
    metadata:
      labels: {example..com/app: x}`, "")},
	{name: "podset template label value starting with a dash", webhook: true, field: "spec.template.metadata.labels", why: "a valid label must be an empty string or consist of", manifest: podSetTemplate(`
    metadata:
      labels: {app: "-web"}`, "")},
	{name: "podset template annotation key name part over 63 characters", webhook: true, field: "spec.template.metadata.annotations", why: "name part must be no more than 63", manifest: podSetTemplate(`
    metadata:
      annotations: {example.com/`+long("n", 64)+`: x}`, "")},
	{name: "podset template annotation key prefix over 253 characters", webhook: true, field: "spec.template.metadata.annotations", why: "prefix part must be no more than 253", manifest: podSetTemplate(`
    metadata:
      annotations: {`+long("p", 254)+`/note: x}`, "")},
	{name: "watcher selector matchLabels key name part over 63 characters", webhook: true, field: "spec.selector.matchLabels", why: "name part must be no more than 63", manifest: watcherHead + watcherContainer + `  selector:
    matchLabels: {example.com/` + long("n", 64) + `: web}`},
	{name: "watcher selector expression key prefix not a DNS subdomain", webhook: true, field: "spec.selector.matchExpressions[0].key", why: "prefix part a lowercase RFC 1123 subdomain", manifest: watcherHead + watcherContainer + `  selector:
    matchExpressions:
    - {key: -example.com/app, operator: Exists}`},
	// Container port names and protocols.
	{name: "podset template port name with an underscore", webhook: true, field: "spec.template.spec.containers[0].ports[0].name", why: "must contain only alpha-numeric characters", manifest: podSetTemplate("", `
        ports: [{name: http_port, containerPort: 8080}]`)},
	{name: "podset template port name over 15 characters", webhook: true, field: "spec.template.spec.containers[0].ports[0].name", why: "no more than 15 characters", manifest: podSetTemplate("", `
        ports: [{name: `+long("h", 16)+`, containerPort: 8080}]`)},
	{name: "podset template port name without a letter", webhook: true, field: "spec.template.spec.containers[0].ports[0].name", why: "at least one letter", manifest: podSetTemplate("", `
        ports: [{name: "8080", containerPort: 8080}]`)},
	{name: "podset template port name twice in a container", webhook: true, field: "spec.template.spec.containers[0].ports[1].name", why: "Duplicate value", manifest: podSetTemplate("", `
        ports: [{name: http, containerPort: 8080}, {name: http, containerPort: 8081}]`)},
	{name: "podset template port protocol HTTP", webhook: true, field: "spec.template.spec.containers[0].ports[0].protocol", why: `supported values: "SCTP", "TCP", "UDP"`, manifest: podSetTemplate("", `
        ports: [{containerPort: 8080, protocol: HTTP}]`)},
	{name: "podset template containerPort over 65535", webhook: true, field: "spec.template.spec.containers[0].ports[0].containerPort", why: "between 1 and 65535", manifest: podSetTemplate("", `
        ports: [{containerPort: 70000}]`)},
	{name: "watcher container port name with two hyphens in a row", webhook: true, field: "spec.container.ports[0].name", why: "consecutive hyphens", manifest: watcherHead + watcherContainer + `    ports: [{name: a--b, containerPort: 8080}]`},
	{name: "watcher container port protocol in lower case", webhook: true, field: "spec.container.ports[0].protocol", why: `supported values: "SCTP", "TCP", "UDP"`, manifest: watcherHead + watcherContainer + `    ports: [{containerPort: 8080, protocol: tcp}]`},
	// Extended resources in whole units, hugepages in whole pages.
	{name: "podset template half an extended resource", webhook: true, field: "spec.template.spec.containers[0].resources.limits[example.com/gpu]", why: "must be a whole number", manifest: podSetTemplate("", `
        resources: {limits: {example.com/gpu: 500m}}`)},
	{name: "watcher container half an extended resource", webhook: true, field: "spec.container.resources.requests[example.com/gpu]", why: "must be a whole number", manifest: watcherHead + watcherContainer + `    resources: {requests: {example.com/gpu: 1500m}, limits: {example.com/gpu: 1500m}}`},
	{name: "podset template hugepages not a whole number of pages", webhook: true, field: "spec.template.spec.containers[0].resources.limits[hugepages-2Mi]", why: "whole number of pages of 2Mi", manifest: podSetTemplate("", `
        resources: {limits: {hugepages-2Mi: 3Mi, memory: 1Gi}}`)},
	{name: "watcher container hugepages not a whole number of pages", webhook: true, field: "spec.container.resources.limits[hugepages-1Gi]", why: "whole number of pages of 1Gi", manifest: watcherHead + watcherContainer + `    resources: {limits: {hugepages-1Gi: 1536Mi, memory: 2Gi}}`},
	{name: "podset template extended resource requested without a limit", webhook: true, field: "spec.template.spec.containers[0].resources.limits[example.com/gpu]", why: "never overcommitted", manifest: podSetTemplate("", `
        resources: {requests: {example.com/gpu: 1}}`)},
	{name: "watcher container extended resource request under its limit", webhook: true, field: "spec.container.resources.requests[example.com/gpu]", why: "must equal the limit 2", manifest: watcherHead + watcherContainer + `    resources: {requests: {example.com/gpu: 1}, limits: {example.com/gpu: 2}}`},
	// An Envoy's resources, which are every proxy's: what its schema's CEL
	// cannot judge.
	{name: "envoy resources hugepages not a whole number of pages", webhook: true, field: "spec.resources.limits[hugepages-2Mi]", why: "whole number of pages of 2Mi", manifest: envoyHead + `spec:
  resources:
    limits: {hugepages-2Mi: 3Mi, memory: 1Gi}`},
	{name: "envoy resources hugepages request above its limit", webhook: true, field: "spec.resources.requests[hugepages-2Mi]", why: "must equal the limit 2Mi", manifest: envoyHead + `spec:
  resources:
    requests: {hugepages-2Mi: 4Mi, memory: 1Gi}
    limits: {hugepages-2Mi: 2Mi, memory: 1Gi}`},
	{name: "envoy resources half an extended resource", webhook: true, field: "spec.resources.limits[example.com/gpu]", why: "must be a whole number", manifest: envoyHead + `spec:
  resources:
    limits: {example.com/gpu: 500m}`},
	{name: "podset template hugepages without cpu or memory", webhook: true, field: "spec.template.spec.containers[0].resources", why: "hugepages need a cpu or memory", manifest: podSetTemplate("", `
        resources: {limits: {hugepages-2Mi: 2Mi}}`)},
	{name: "podset template resource name no container has", webhook: true, field: "spec.template.spec.containers[0].resources.limits[gpu]", why: "must be cpu, memory, ephemeral-storage, hugepages-<page size>", manifest: podSetTemplate("", `
        resources: {limits: {gpu: 1}}`)},
	{name: "podset template negative memory", webhook: true, field: "spec.template.spec.containers[0].resources.limits[memory]", why: "must not be negative", manifest: podSetTemplate("", `
        resources: {limits: {memory: -1Gi}}`)},
	// Watcher volumes and what its container mounts.
	{name: "watcher configMap volume item outside the volume", webhook: true, field: "spec.volume.configMap.items[0].path", why: "must not contain '..'", manifest: watcherHead + watcherContainer + `  volume: {name: logs, configMap: {name: logs, items: [{key: a, path: ../a}]}}`},
	{name: "watcher secret volume item at an absolute path", webhook: true, field: "spec.volume.secret.items[0].path", why: "must be a relative path", manifest: watcherHead + watcherContainer + `  volume: {name: logs, secret: {secretName: logs, items: [{key: a, path: /etc/a}]}}`},
	{name: "watcher configMap volume item starting with ..", webhook: true, field: "spec.volume.configMap.items[0].path", why: "must not start with '..'", manifest: watcherHead + watcherContainer + `  volume: {name: logs, configMap: {name: logs, items: [{key: a, path: ..data}]}}`},
	{name: "watcher volume defaultMode over 0777", webhook: true, field: "spec.volume.configMap.defaultMode", why: "file mode from 0 to 0777", manifest: watcherHead + watcherContainer + `  volume: {name: logs, configMap: {name: logs, defaultMode: 1000}}`},
	{name: "watcher hostPath volume of an unknown type", webhook: true, field: "spec.volume.hostPath.type", why: "supported values", manifest: watcherHead + watcherContainer + `  volume: {name: logs, hostPath: {path: /var/log, type: Folder}}`},
	{name: "watcher emptyDir volume of a negative size", webhook: true, field: "spec.volume.emptyDir.sizeLimit", why: "must not be negative", manifest: watcherHead + watcherContainer + `  volume: {name: logs, emptyDir: {sizeLimit: -1Gi}}`},
	{name: "watcher container mount with an empty path", webhook: true, field: "spec.container.volumeMounts[0].mountPath", why: "Required value", manifest: watcherHead + watcherContainer + `    volumeMounts: [{name: logs, mountPath: ""}]
  volume: {name: logs, emptyDir: {}}`},
	{name: "watcher container mount subPath outside the volume", webhook: true, field: "spec.container.volumeMounts[0].subPath", why: "must not contain '..'", manifest: watcherHead + watcherContainer + `    volumeMounts: [{name: logs, mountPath: /logs, subPath: a/../../b}]
  volume: {name: logs, emptyDir: {}}`},
	{name: "podset template mount of a volume it does not have", webhook: true, field: "spec.template.spec.containers[0].volumeMounts[0].name", why: "Not found", manifest: podSetTemplate("", `
        volumeMounts: [{name: data, mountPath: /data}]`)},
	{name: "podset template volume with two sources", webhook: true, field: "spec.template.spec.volumes[0]", why: "exactly one volume source", manifest: podSetHead + `spec:
  template:
    spec:
      containers: [{name: web, image: nginx}]
      volumes: [{name: data, emptyDir: {}, configMap: {name: data}}]`},
}

// podSetTemplate is a PodSet whose template has meta as its metadata and
// one container, with container as the rest of its fields.
func podSetTemplate(meta, container string) string {
	return podSetHead + `spec:
  template:` + meta + `
    spec:
      containers:
      - name: web
        image: nginx` + container
}

// validManifests are edge cases that must be admitted.
var validManifests = []struct{ name, manifest string }{
	{"envoy rollout of proxies, then percentages, no bake", head("Envoy", "rollout") + `spec:
  configRollout:
    steps: [{proxies: 1}, {percent: 25}, {percent: 100}]
    bakeSeconds: 0`},
	{"envoy rollout with the default analysis", head("Envoy", "rollout-analysis") + `spec:
  configRollout:
    steps: [{proxies: 1}]
    analysis: {}`},
	{"envoy rollout with every analysis bound off or at its edge", head("Envoy", "rollout-analysis-edges") + `spec:
  configRollout:
    steps: [{proxies: 1}]
    analysis:
      minRequests: 1
      serverErrors: {maxPercent: 0, maxToBaselinePercent: 0}
      resets: {maxPercent: 100, maxToBaselinePercent: 100}
      connectFailures: {maxPercent: 1, maxToBaselinePercent: 100000}
      latencyP99: {maxMilliseconds: 0, maxToBaselinePercent: 0}`},
	{"envoy port without targetPort", head("Envoy", "no-target-port") + `spec:
  ports:
  - {name: http, port: 8080}`},
	{"envoy ports without targetPort, mixed", head("Envoy", "mixed-ports") + `spec:
  ports:
  - {name: http, port: 8080}
  - {name: https, port: 443, targetPort: 8443}
  - {name: grpc, port: 9000}`},
	{"envoy ports at both ends of the range", head("Envoy", "port-range") + `spec:
  ports:
  - {name: low, port: 1}
  - {name: high, port: 65535}`},
	{"envoy no replicas", head("Envoy", "no-replicas") + `spec:
  replicas: 0`},
	{"envoy with a dotted name and spec.name", head("Envoy", "edge.proxy") + `spec:
  name: edge-proxy`},
	{"envoy name of 63 characters", head("Envoy", "e"+long("x", 62))},
	{"envoy podLabels at their limits", head("Envoy", "labels") + `spec:
  podLabels:
    example.com/team: ` + long("v", 63) + `
    ` + long("k", 63) + `: ""
    tier: a.b_c-d`},
	{"envoy podAnnotations with any value", head("Envoy", "annotations") + `spec:
  podAnnotations:
    example.com/note: "any text, even with spaces: and colons"
    Capital.Key/Name: x`},
	{"envoy xds on an IP address", head("Envoy", "xds-ip") + `spec:
  xds: {host: 10.0.0.1, port: 18000}`},
	{"envoy resources requests equal to limits", head("Envoy", "resources") + `spec:
  resources:
    requests: {cpu: 500m, memory: 1Gi, hugepages-2Mi: 2Mi, example.com/device: 1}
    limits: {cpu: "0.5", memory: 1073741824, hugepages-2Mi: 2Mi, example.com/device: 1}`},
	{"envoy resources limits only", head("Envoy", "limits-only") + `spec:
  resources:
    limits: {cpu: 2}`},
	{"envoyconfig envoyRef of 63 characters", head("EnvoyConfig", "long-ref") + `spec:
  envoyRef: ` + long("e", 63)},
	{"envoyconfig envoyRef with a dot", head("EnvoyConfig", "dotted-ref") + `spec:
  envoyRef: edge.proxy`},
	{"envoyconfig tlsSecrets at their bounds", head("EnvoyConfig", "tls-secrets") + `spec:
  envoyRef: edge
  tlsSecrets:
  - {name: "server_cert.v2:example.com/@-", secretRef: web-tls}
  - {name: ` + long("n", 253) + `, secretRef: ` + strings.Repeat("s.", 126) + `s}
  - {name: same-secret-again, secretRef: web-tls}
` + manyTLSSecrets(253)},
	{"envoy image of a registry with a port, a tag and a digest", head("Envoy", "image-digest") + `spec:
  image: registry.example.com:5000/team/envoy-proxy:v1.40.0_rc.1@` + digest},
	{"envoy image of a registry in capitals", head("Envoy", "image-registry") + `spec:
  image: MyRegistry/envoy`},
	{"envoy image of localhost and double underscores", head("Envoy", "image-localhost") + `spec:
  image: localhost/team__a/envoy--proxy.v2:latest`},
	{"envoy resources extended resources and hugepages at their limits", head("Envoy", "extended") + `spec:
  resources:
    requests: {example.com/device: 2, hugepages-1Gi: 1Gi, cpu: 100m}
    limits: {example.com/device: 2, hugepages-1Gi: 1Gi, memory: 2Gi}`},
	{"envoy port name with one dash", head("Envoy", "port-dash") + `spec:
  ports:
  - {name: http-alt, port: 8080}`},
	{"envoyconfig serviceEndpoints by name and by number", head("EnvoyConfig", "service-ports") + `spec:
  envoyRef: service-ports
  serviceEndpoints:
  - {cluster: a, service: web, port: http-metrics}
  - {cluster: b, service: w` + long("e", 62) + `, port: 65535}
  - {cluster: c, service: web, port: 1}`},
	{"envoyconfig two listeners on one port of two addresses", withResources("two-addresses", "two-addresses",
		listenersOn(tcpListener("a", "0.0.0.0", 8080), tcpListener("b", "127.0.0.1", 8080), tcpListener("c", "::", 8080))+clusterK)},
	{"envoyconfig TCP and UDP listeners on one port", withResources("tcp-and-udp", "tcp-and-udp",
		listenersOn(tcpListener("a", "0.0.0.0", 5353), fmt.Sprintf(listenerOn, "b", "0.0.0.0", 5353, ", protocol: UDP", "udp_listener_config: {}"))+clusterK)},
	{"envoyconfig listener on the ready port of another address", withResources("ready-port", "ready-port",
		listenersOn(tcpListener("a", "10.0.0.1", 19001))+clusterK)},
	{"envoyconfig regex RE2 accepts", withResources("regex", "regex",
		fmt.Sprintf(routeToK, `{safe_regex: {regex: "^/(?P<lang>[a-z]{2})/items/[a-f0-9]{32}$"}}`, "")+clusterK)},
	{"envoyconfig STRICT_DNS cluster on a host name", withResources("strict-dns", "strict-dns",
		"    clusters:\n    - {name: k, type: STRICT_DNS, load_assignment: {cluster_name: k, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: web.default.svc, port_value: 80}}}}]}]}}\n")},
	{"envoyconfig one domain as exact, prefix and suffix", withResources("domains", "domains",
		"    routes:\n    - {name: r, virtual_hosts: [{name: v, domains: [web.example.com, \"web.example.com*\"]}, {name: v, domains: [\"*web.example.com\", \"*\"]}]}\n")},
	{"envoyconfig direct response body of 4 KiB", withResources("body", "body",
		"    routes:\n    - {name: r, virtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: /}, direct_response: {status: 200, body: {inline_string: "+long("x", 4096)+"}}}]}]}\n")},
	{"watcher container image with a digest", head("Watcher", "digest") + `spec:
  container: {name: tail, image: "registry.example.com/tools/busybox@` + digest + `"}`},
	{"watcher volume of each common source", head("Watcher", "volume") + watcherContainer + `  volume: {name: logs, configMap: {name: logs-config, optional: true}}`},
	{"foobar image with a registry port and a digest", head("FooBar", "image-digest") + `spec:
  command: "true"
  image: localhost:5000/tools/busybox:1.36@` + digest},
	{"watcher minimal", head("Watcher", "minimal") + watcherContainer},
	{"watcher name of 63 characters", head("Watcher", long("w", 63)) + watcherContainer},
	{"watcher empty selector", head("Watcher", "everything") + watcherContainer + `  selector: {}`},
	{"watcher selector of every operator", head("Watcher", "operators") + watcherContainer + `  selector:
    matchLabels: {example.com/app: web}
    matchExpressions:
    - {key: tier, operator: In, values: [a, b]}
    - {key: tier, operator: NotIn, values: [c]}
    - {key: example.com/debug, operator: DoesNotExist}
    - {key: role, operator: Exists}`},
	{"watcher with volume, pull secret and resources", head("Watcher", "full") + `spec:
  container:
    name: tail
    image: busybox
    ports: [{containerPort: 1}, {containerPort: 65535}]
    resources:
      requests: {cpu: 100m}
      limits: {cpu: 100m}
  volume: {name: logs, emptyDir: {}}
  imagePullSecrets: {name: registry.example.com}
  configData: {LEVEL: debug}
  configBinaryData: {blob: eA==}`},
	{"foo replicas at both bounds", head("Foo", "bounds") + `spec:
  deploymentName: ` + strings.Repeat("d.", 126) + `d
  replicas: 10`},
	{"foo replicas 1", head("Foo", "one") + `spec:
  deploymentName: one
  replicas: 1`},
	{"podset replicas 0", head("PodSet", "empty") + `spec:
  replicas: 0`},
	{"podset without spec fields", head("PodSet", "defaults") + `spec: {}`},
	{"podset with a template", head("PodSet", "template") + `spec:
  replicas: 2
  template:
    metadata:
      labels: {app: web, example.com/tier: ""}
      annotations: {note: "free text"}
    spec:
      restartPolicy: Never
      containers: [{name: web, image: nginx}, {name: sidecar, image: busybox}]`},
	{"podset name of 63 characters", head("PodSet", long("p", 63)) + `spec:
  replicas: 1`},
	{"foobar name of 52 characters", head("FooBar", long("r", 52)) + `spec:
  command: "true"`},
	{"foobar with an empty environment", head("FooBar", "empty-env") + `spec:
  command: echo "$FOO$BARZ"
  foo: ""
  barz: ""
  image: registry.example.com/tools/busybox:1.36`},
	{"envoy that drains, with its grace period at the least", head("Envoy", "drains") + `spec:
  drainSeconds: 30
  terminationGracePeriodSeconds: 35`},
	{"envoy that does not drain, with a short grace period", head("Envoy", "no-drain") + `spec:
  drainSeconds: 0
  terminationGracePeriodSeconds: 5`},
	{"envoy budget asked for, with defaults", head("Envoy", "budget-defaults") + `spec:
  replicas: 1
  podDisruptionBudget: {}`},
	{"envoy budget as a percentage", head("Envoy", "budget-percent") + `spec:
  podDisruptionBudget: {minAvailable: "100%"}`},
	{"envoy budget of 0", head("Envoy", "budget-zero") + `spec:
  podDisruptionBudget: {maxUnavailable: 0}`},
	{"envoy autoscaling with one bound", head("Envoy", "autoscaled") + `spec:
  resources: {requests: {cpu: 100m}}
  autoscaling: {maxReplicas: 1}`},
	{"envoy spread, every field", head("Envoy", "spread") + `spec:
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, minDomains: 3, nodeAffinityPolicy: Ignore, nodeTaintsPolicy: Honor}
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}`},
	{"watcher as a native sidecar", head("Watcher", "native") + watcherContainer + `  nativeSidecar: true`},
	{"podset template label and annotation keys at their longest", head("PodSet", "long-keys") + `spec:
  template:
    metadata:
      labels: {` + strings.Repeat("a.", 126) + `a/` + long("n", 63) + `: ` + long("v", 63) + `, empty: ""}
      annotations: {` + strings.Repeat("b.", 126) + `b/` + long("n", 63) + `: "any text at all"}
    spec:
      containers: [{name: web, image: nginx}]`},
	{"podset template ports of every protocol, one name in two containers", head("PodSet", "ports") + `spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx
        ports: [{name: abcdefghijklmno, containerPort: 1, protocol: TCP}, {name: dns-1, containerPort: 65535, protocol: UDP}, {containerPort: 9, protocol: SCTP}]
      - name: sidecar
        image: busybox
        ports: [{name: abcdefghijklmno, containerPort: 8080, hostPort: 8080}]`},
	{"podset template whole extended resources and hugepages", head("PodSet", "devices") + `spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx
        resources:
          requests: {example.com/gpu: 2, hugepages-2Mi: 4Mi, cpu: 100m}
          limits: {example.com/gpu: 2, hugepages-2Mi: 4Mi, cpu: 100m}
      - name: only-limits
        image: nginx
        resources: {limits: {example.com/gpu: 1, hugepages-1Gi: 2Gi, memory: 3Gi}}`},
	{"podset template volumes and mounts", head("PodSet", "volumes") + `spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx
        volumeMounts: [{name: data, mountPath: /data, subPath: a/b}, {name: conf, mountPath: /etc/conf}]
      volumes:
      - {name: data, emptyDir: {sizeLimit: 1Gi}}
      - {name: conf, configMap: {name: conf, defaultMode: 0644, items: [{key: a, path: dir/a, mode: 0400}]}}`},
	{"watcher whole extended resources and hugepages", head("Watcher", "devices") + watcherContainer + `    resources:
      requests: {example.com/gpu: 1, hugepages-2Mi: 2Mi, memory: 64Mi}
      limits: {example.com/gpu: 1, hugepages-2Mi: 2Mi, memory: 64Mi}`},
	{"watcher ports of every protocol", head("Watcher", "ports") + watcherContainer + `    ports: [{name: http, containerPort: 8080}, {name: dns, containerPort: 53, protocol: UDP}, {name: s, containerPort: 9, protocol: SCTP}]`},
	{"watcher volume items, modes and a mount below it", head("Watcher", "items") + watcherContainer + `    volumeMounts: [{name: logs, mountPath: /logs, subPath: app}]
  volume: {name: logs, secret: {secretName: logs, defaultMode: 0400, items: [{key: a, path: a/b.conf, mode: 0777}]}}`},
	{"watcher mount of a volume the pod brings", head("Watcher", "pod-volume") + watcherContainer + `    volumeMounts: [{name: data, mountPath: /data}]`},
	{"watcher hostPath volume of a known type", head("Watcher", "host-path") + watcherContainer + `  volume: {name: logs, hostPath: {path: /var/log, type: DirectoryOrCreate}}`},
	{"watcher selector keys at their longest", head("Watcher", "long-selector") + watcherContainer + `  selector:
    matchLabels: {` + strings.Repeat("a.", 126) + `a/` + long("n", 63) + `: web}
    matchExpressions:
    - {key: ` + strings.Repeat("b.", 126) + `b/` + long("n", 63) + `, operator: Exists}`},
}

// decode parses a manifest into an object for the dynamic client.
func decode(t *testing.T, manifest string) (*unstructured.Unstructured, schema.GroupVersionResource) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("the manifest is not YAML: %v\n%s", err, manifest)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatalf("the manifest is not an object: %v\n%s", err, manifest)
	}
	gvr, ok := resources[u.GetKind()]
	if !ok {
		t.Fatalf("no resource for kind %q", u.GetKind())
	}
	return u, gvr
}

// create sends the manifest as kubectl apply does when the object is new: a
// create, with strict field validation (kubectl's default).
func create(ctx context.Context, t *testing.T, client dynamic.Interface, ns, manifest string) (*unstructured.Unstructured, error) {
	t.Helper()
	u, gvr := decode(t, manifest)
	return client.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
}

func TestInvalidManifestsAreRefused(t *testing.T) {
	if n := len(invalidManifests); n < 60 {
		t.Fatalf("only %d invalid manifests", n)
	}
	kinds := map[string]int{}
	for _, tc := range invalidManifests {
		u, _ := decode(t, tc.manifest)
		kinds[u.GetKind()]++
	}
	for kind := range resources {
		if kinds[kind] == 0 {
			t.Errorf("no invalid manifest of kind %s", kind)
		}
	}

	ctx := context.Background()
	client := dynamic.NewForConfigOrDie(cfg)
	ns := namespace(t)
	seen := map[string]bool{}
	for _, tc := range invalidManifests {
		if seen[tc.name] {
			t.Fatalf("two cases named %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			got, err := create(ctx, t, client, ns, tc.manifest)
			if err == nil {
				// Admitted: remove it, so that it does not hide the next case of this name.
				_, gvr := decode(t, tc.manifest)
				_ = client.Resource(gvr).Namespace(ns).Delete(ctx, got.GetName(), metav1.DeleteOptions{})
				t.Fatalf("admitted; want it refused, naming %s:\n%s", tc.field, tc.manifest)
			}
			switch {
			case tc.webhook && !apierrors.IsForbidden(err):
				t.Fatalf("not refused by the validating webhook (%s): %v", apierrors.ReasonForError(err), err)
			case !tc.webhook && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err):
				t.Fatalf("refused for another reason than the manifest (%s): %v", apierrors.ReasonForError(err), err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.field) {
				t.Errorf("the error does not name %s:\n%s", tc.field, msg)
			}
			if !strings.Contains(msg, tc.why) {
				t.Errorf("the error does not say %q:\n%s", tc.why, msg)
			}
		})
	}
}

func TestValidEdgeCasesAreAdmitted(t *testing.T) {
	ctx := context.Background()
	client := dynamic.NewForConfigOrDie(cfg)
	ns := namespace(t)
	for _, tc := range validManifests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := create(ctx, t, client, ns, tc.manifest); err != nil {
				t.Fatalf("refused: %v\n%s", err, tc.manifest)
			}
		})
	}
}

// The fuzz tests keep the specs that internal/testing/crdschema admits, in process:
// it must refuse and admit what this API server does. What a validating
// webhook refuses, its own code (translate.Admit, podtemplate.Watcher and
// podtemplate.PodSet) refuses in process, and the schema admits.
func TestInProcessSchemaAgrees(t *testing.T) {
	schema := func(t *testing.T, manifest string) field.ErrorList {
		t.Helper()
		u, _ := decode(t, manifest)
		s, err := crdschema.LoadFromRoot(u.GetKind())
		if err != nil {
			t.Fatal(err)
		}
		return s.Admit(u.Object)
	}
	// webhook is what the validating webhooks say of an EnvoyConfig created
	// alone in its fleet, and of a Watcher, a PodSet or an Envoy.
	webhook := func(t *testing.T, manifest string) []string {
		t.Helper()
		u, _ := decode(t, manifest)
		var obj any
		switch u.GetKind() {
		case "EnvoyConfig":
			obj = &examplev1.EnvoyConfig{}
		case "Watcher":
			obj = &watchv1alpha1.Watcher{}
		case "PodSet":
			obj = &demov1alpha1.PodSet{}
		case "Envoy":
			obj = &examplev1.Envoy{}
		default:
			return nil
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			t.Fatal(err)
		}
		var errs field.ErrorList
		switch o := obj.(type) {
		case *examplev1.EnvoyConfig:
			c := translate.FromObject(o)
			return translate.Admit(translate.Policy{Namespace: "kube-envoy-controller"}, nil, c.Name, &c)
		case *watchv1alpha1.Watcher:
			errs = podtemplate.Watcher(o)
		case *demov1alpha1.PodSet:
			errs = podtemplate.PodSet(o)
		case *examplev1.Envoy:
			errs = podtemplate.Envoy(o)
		}
		var problems []string
		for _, e := range errs {
			problems = append(problems, e.Error())
		}
		return problems
	}
	for _, tc := range invalidManifests {
		if tc.why == "unknown field" {
			continue // strict decoding, before validation; the fuzz tests decode into Go types
		}
		t.Run(tc.name, func(t *testing.T) {
			errs := schema(t, tc.manifest)
			if tc.webhook {
				if len(errs) > 0 {
					t.Fatalf("refused by the schema; the webhook should be the one to refuse it: %v", errs.ToAggregate())
				}
				problems := webhook(t, tc.manifest)
				if len(problems) == 0 {
					t.Fatalf("admitted by the webhook's own code (translate.Admit, podtemplate); the webhook refuses it, naming %s", tc.field)
				}
				if msg := strings.Join(problems, "; "); !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.why) {
					t.Errorf("the problems do not name %s and say %q:\n%s", tc.field, tc.why, msg)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("admitted in process; the API server refuses it, naming %s", tc.field)
			}
			if msg := errs.ToAggregate().Error(); !strings.Contains(msg, tc.field) {
				t.Errorf("the errors do not name %s:\n%s", tc.field, msg)
			}
		})
	}
	for _, tc := range validManifests {
		t.Run(tc.name, func(t *testing.T) {
			if errs := schema(t, tc.manifest); len(errs) > 0 {
				t.Fatalf("refused in process; the API server admits it: %v", errs.ToAggregate())
			}
			if problems := webhook(t, tc.manifest); len(problems) > 0 {
				t.Fatalf("refused by the webhook's own code (translate.Admit, podtemplate); the webhook admits it: %v", problems)
			}
		})
	}
}

// Two listeners of a fleet on one address, in two EnvoyConfigs: the
// webhook refuses the second, naming the listener and the EnvoyConfig that
// has the address (Envoy: "error adding listener: 'b' has duplicate address
// '0.0.0.0:8080' as existing listener"). On the same port of another
// address, the second is admitted.
func TestListenerAddressSharedAcrossEnvoyConfigs(t *testing.T) {
	ctx := context.Background()
	client := dynamic.NewForConfigOrDie(cfg)
	ns := namespace(t)
	if _, err := create(ctx, t, client, ns, withResources("first", "shared", listenersOn(tcpListener("a", "0.0.0.0", 8080))+clusterK)); err != nil {
		t.Fatal(err)
	}
	want := `spec.resources.listeners[0] ("b"): address: 0.0.0.0:8080 is also the address of listener spec.resources.listeners[0] ("a") of EnvoyConfig ` + ns + `/first`
	// The webhook reads the fleet's other EnvoyConfigs from its cache: until
	// the cache holds first, the second's listener names a cluster that does
	// not exist yet, and that refusal is retried. Any other outcome fails.
	testenv.Eventually(t, "the webhook to judge second against first", func() (bool, error) {
		_, err := create(ctx, t, client, ns, withResources("second", "shared", listenersOn(tcpListener("b", "0.0.0.0", 8080))))
		switch {
		case err == nil:
			t.Fatalf("admitted; want a denial saying %s", want)
		case strings.Contains(err.Error(), want):
			return true, nil
		case !strings.Contains(err.Error(), `cluster "k" does not exist`):
			t.Fatalf("got %v, want a denial saying %s", err, want)
		}
		return false, err
	})
	if _, err := create(ctx, t, client, ns, withResources("second", "shared", listenersOn(tcpListener("b", "127.0.0.1", 8080)))); err != nil {
		t.Errorf("a listener on the same port of another address: %v", err)
	}
}
