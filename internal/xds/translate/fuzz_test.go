package translate

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// FuzzTranslate gives arbitrary bytes as one resource of an EnvoyConfig,
// beside a valid fleet (a listener, its route configuration, the route's
// cluster), with or without that content published. Translation never
// panics; every resource it serves passes Envoy's validation and the
// content policy; and unless the fleet is held, the served content's
// references all resolve.
func FuzzTranslate(f *testing.F) {
	for _, seed := range []string{
		`{"name": "k2", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}}}}`,
		`{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "gone"}}]}]}`,
		listenerL,
		`{"cluster_name": "k", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.0.0.1", "port_value": 80}}}}]}]}`,
		`{"name": "s", "tls_certificate": {"certificate_chain": {"inline_string": "x"}}}`,
		`{"name": "s", "tls_certificate": {"private_key": {"inline_bytes": "aw=="}}}`,
		`{"name": "s", "tls_certificate": {"private_key": {"filename": "/etc/envoy/xds-tls/tls.key"}}}`,
		`{"name": "k", "type": "STATIC", "connect_timeout": "1s", "load_assignment": {"cluster_name": "k", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "169.254.169.254", "port_value": 80}}}}]}]}}`,
		`{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": {"filename": "/var/run/secrets/kubernetes.io/serviceaccount/token"}}}]}]}`,
		`{"name": "https", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8443}}, "filter_chains": [{"transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext", "common_tls_context": {"tls_certificate_sds_secret_configs": [{"name": "s", "sds_config": {"ads": {}}}]}}}, "filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "k"}}]}]}`,
		`{"name": "k", "type": "EDS", "bogus": 1}`,
		`not json`, `[]`, `{}`, `{"name": ""}`,
	} {
		for kind := range len(resource.Kinds) {
			f.Add(uint8(kind), []byte(seed), false)
			f.Add(uint8(kind), []byte(seed), true)
		}
	}
	l := config("l", examplev1.EnvoyResources{Listeners: []runtime.RawExtension{raw(listenerL)}})
	r := config("r", examplev1.EnvoyResources{Routes: []runtime.RawExtension{raw(routeR)}})
	c := config("c", examplev1.EnvoyResources{Clusters: []runtime.RawExtension{clusterNamed("k")}})
	f.Fuzz(func(t *testing.T, kind uint8, data []byte, published bool) {
		var res examplev1.EnvoyResources
		item := []runtime.RawExtension{{Raw: data}}
		switch resource.Kinds[int(kind)%len(resource.Kinds)].Field {
		case "listeners":
			res.Listeners = item
		case "routes":
			res.Routes = item
		case "clusters":
			res.Clusters = item
		case "endpoints":
			res.Endpoints = item
		default:
			res.Secrets = item
		}
		fuzzed := config("fuzzed", res)
		// Younger than the rest: of two EnvoyConfigs whose listeners share
		// an address, the younger is not served.
		fuzzed.Created = time.Unix(1, 0)
		in := Input{Configs: []Config{l, r, c, fuzzed}, Policy: testPolicy}
		if published {
			in.Published = []Config{l.Recorded(), r.Recorded(), c.Recorded(), fuzzed.Recorded()}
		}
		ir := Translate(in)
		for typeURL, rs := range ir.Resources {
			for _, m := range rs {
				if err := m.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
					t.Fatalf("served an invalid %s: %v", typeURL, err)
				}
				r := resource.Resource{Kind: resource.KindOf(typeURL), Name: "served", Message: m, Path: typeURL}
				if refused := in.Policy.refusals("ns/served", []resource.Resource{r}); len(refused) > 0 {
					t.Fatalf("served what the policy refuses: %v", refused)
				}
			}
		}
		if len(ir.Held) == 0 && !published {
			if dangling := checkReferences(mergeOf(ir.Revision, in.Configs, in.Policy.refused)); len(dangling) > 0 {
				t.Fatalf("served content whose references lead nowhere: %v", dangling)
			}
		}
		if st := ir.Configs["ns/l"]; st.Choice != ChoiceCurrent {
			t.Fatalf("the valid listener is not served as it is: %+v", st)
		}
	})
}
