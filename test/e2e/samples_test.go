//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// served asks the operator's xDS server, as a proxy of fleet, for the
// resources of typeURL (the named ones, or all) and returns the first
// response's resources by name.
func served(t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient, fleet, typeURL string, names ...string) map[string]proto.Message {
	t.Helper()
	p := xdstest.Connect(t, c, fleet, "e2e-samples", typeURL, names...)
	resp, err := p.Next("")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]proto.Message{}
	for _, a := range resp.GetResources() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		out[cachev3.GetResourceName(m)] = m
	}
	return out
}

// firstRoute is the action of the first route of the first virtual host of
// the route configuration m.
func firstRoute(t *testing.T, m proto.Message) *routev3.RouteAction {
	t.Helper()
	rc, _ := m.(*routev3.RouteConfiguration)
	if len(rc.GetVirtualHosts()) == 0 || len(rc.GetVirtualHosts()[0].GetRoutes()) == 0 {
		t.Fatalf("route configuration %s has no route", rc.GetName())
	}
	return rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute()
}

func keys(m map[string]proto.Message) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// runningAddresses returns, for each app label value given, the addresses
// (ip:8080) of its Running pods that are not being deleted, sorted, asking
// again if kubectl fails.
func runningAddresses(t *testing.T, ns string, selectors map[string]string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for cluster, selector := range selectors {
		var list string
		framework.Eventually(t, time.Minute, "the Running pods' addresses", func() (bool, error) {
			var err error
			list, err = kubectl.Out("-n", ns, "get", "pods", "-l", selector, "--field-selector=status.phase=Running",
				"-o", `jsonpath={range .items[*]}{.status.podIP} {.metadata.deletionTimestamp}{"\n"}{end}`)
			return err == nil, err
		})
		for _, line := range strings.Split(list, "\n") {
			if f := strings.Fields(line); len(f) == 1 {
				out[cluster] = append(out[cluster], f[0]+":8080")
			}
		}
		slices.Sort(out[cluster])
	}
	return out
}

// waitEndpoints reads EDS responses for the clusters of selectors (cluster
// name to the label selector of its Service's pods) until each cluster has
// as many endpoints as want says; they must then be exactly the Running
// pods' addresses.
func waitEndpoints(t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient, fleet, ns string, selectors map[string]string, want map[string]int) {
	t.Helper()
	var names []string
	for n := range selectors {
		names = append(names, n)
	}
	p := xdstest.Connect(t, c, fleet, "e2e-samples-eds", resourcev3.EndpointType, names...)
	p.Timeout = 2 * time.Minute
	for range 30 {
		resp, err := p.Next("")
		if err != nil {
			t.Fatalf("no EDS response with endpoints %v: %v", want, err)
		}
		got := map[string][]string{}
		for _, a := range resp.GetResources() {
			cla := &endpointv3.ClusterLoadAssignment{}
			if err := a.UnmarshalTo(cla); err != nil {
				t.Fatal(err)
			}
			for _, loc := range cla.GetEndpoints() {
				for _, e := range loc.GetLbEndpoints() {
					sa := e.GetEndpoint().GetAddress().GetSocketAddress()
					got[cla.GetClusterName()] = append(got[cla.GetClusterName()], fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
				}
			}
		}
		counts := map[string]int{}
		for n, addrs := range got {
			counts[n] = len(addrs)
			slices.Sort(addrs)
		}
		t.Logf("EDS version %s: endpoints %v", resp.GetVersionInfo(), counts)
		if !maps.Equal(counts, want) {
			continue
		}
		running := runningAddresses(t, ns, selectors)
		for n := range selectors {
			if !slices.Equal(got[n], running[n]) {
				t.Fatalf("cluster %s has endpoints %v, want the Running pods %v", n, got[n], running[n])
			}
		}
		return
	}
	t.Fatalf("no EDS response with endpoints %v in 30 responses", want)
}

// applyGatewaySamples applies the gateway samples in ns as make run does:
// the TLS Secret web-tls, labelled for the control plane (a new
// certificate, returned), then the HTTP, canary and TLS samples, in order.
func applyGatewaySamples(t *testing.T, ns string) (crt []byte) {
	t.Helper()
	crtPath, keyPath, crt := writeCertificate(t, t.TempDir(), "web.example.com")
	applyTLSSecret(t, ns, crtPath, keyPath)
	kubectl.Run(t, "-n", ns, "label", "secret", "web-tls", "kube-envoy-controller.io/xds-secret=tls")
	for _, f := range []string{"example_v1_envoyconfig_http.yaml", "example_v1_envoyconfig_http_canary.yaml", "example_v1_envoyconfig_https.yaml"} {
		kubectl.Run(t, "-n", ns, "apply", "-f", sample(f))
	}
	return crt
}

// The gateway samples, applied unchanged in their order (as make run applies
// config/samples): HTTP routing to a Service's pods, a 90/10 canary, and TLS
// termination with a Kubernetes TLS Secret. What the fleet's proxies are
// served is what the samples' comments promise.
func TestGatewaySamples(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "e2e-samples")
	crt := applyGatewaySamples(t, ns)
	for _, ec := range []string{"web-routing", "web-canary", "web-tls"} {
		kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/"+ec, `{.status.conditions[?(@.type=="Accepted")].status}`, "True")
		kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/"+ec, `{.status.conditions[?(@.type=="Degraded")].status}`, "False")
	}
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/web-gateway", "{.status.availableReplicas}", "2")

	fleet := ns + "/web-gateway"
	c := dialAsFleet(t, ns, "web-gateway")

	listeners := served(t, c, fleet, resourcev3.ListenerType)
	if got := keys(listeners); !slices.Equal(got, []string{"canary", "http", "https"}) {
		t.Fatalf("listeners %v, want canary, http and https", got)
	}
	for name, port := range map[string]uint32{"http": 8080, "canary": 8081, "https": 8443} {
		if p := listeners[name].(*listenerv3.Listener).GetAddress().GetSocketAddress().GetPortValue(); p != port {
			t.Errorf("listener %s on port %d, want %d", name, p, port)
		}
	}

	clusters := served(t, c, fleet, resourcev3.ClusterType)
	if got := keys(clusters); !slices.Equal(got, []string{"web", "web-canary"}) {
		t.Errorf("clusters %v, want web and web-canary", got)
	}
	for n, m := range clusters {
		if typ := m.(*clusterv3.Cluster).GetType(); typ != clusterv3.Cluster_EDS {
			t.Errorf("cluster %s is %s, want EDS", n, typ)
		}
	}

	routes := served(t, c, fleet, resourcev3.RouteType, "web", "canary")
	if got := keys(routes); !slices.Equal(got, []string{"canary", "web"}) {
		t.Fatalf("route configurations %v, want canary and web", got)
	}
	if got := firstRoute(t, routes["web"]).GetCluster(); got != "web" {
		t.Errorf("route web goes to cluster %q, want web", got)
	}
	weights := map[string]uint32{}
	for _, wc := range firstRoute(t, routes["canary"]).GetWeightedClusters().GetClusters() {
		weights[wc.GetName()] = wc.GetWeight().GetValue()
	}
	if weights["web"] != 90 || weights["web-canary"] != 10 || len(weights) != 2 {
		t.Errorf("canary weights %v, want web 90 and web-canary 10", weights)
	}

	// The endpoints are the Services' ready KWOK pods, and follow the
	// Deployments as they scale.
	selectors := map[string]string{"web": "app=web,track=stable", "web-canary": "app=web,track=canary"}
	waitEndpoints(t, c, fleet, ns, selectors, map[string]int{"web": 2, "web-canary": 1})
	kubectl.Run(t, "-n", ns, "scale", "deployment/web", "--replicas=4")
	waitEndpoints(t, c, fleet, ns, selectors, map[string]int{"web": 4, "web-canary": 1})
	kubectl.Run(t, "-n", ns, "scale", "deployment/web", "--replicas=1")
	waitEndpoints(t, c, fleet, ns, selectors, map[string]int{"web": 1, "web-canary": 1})

	secrets := served(t, c, fleet, resourcev3.SecretType, "web-cert")
	s, _ := secrets["web-cert"].(*tlsv3.Secret)
	if got := s.GetTlsCertificate().GetCertificateChain().GetInlineBytes(); string(got) != string(crt) {
		t.Errorf("secret web-cert serves %d bytes of certificate, not the Secret web-tls's", len(got))
	}
}

// The sidecar sample, applied unchanged in a namespace that enables
// injection: its Deployment's pods get an Envoy sidecar of the fleet
// shop-mesh, and the fleet's EnvoyConfig is what the sidecars are served.
func TestSidecarSample(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "e2e-sidecar-sample")
	kubectl.Run(t, "label", "namespace", ns, "kube-envoy-controller.io/injection=enabled")
	kubectl.Run(t, "-n", ns, "apply", "-f", sample("example_v1_envoy_sidecar.yaml"))
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/shop-routes", `{.status.conditions[?(@.type=="Accepted")].status}`, "True")
	// The ReplicaSet controller retries a pod the webhook refused while it
	// was not serving yet; every pod that exists carries the sidecar.
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "deployment/shop", "{.status.availableReplicas}", "2")
	out := kubectl.Run(t, "-n", ns, "get", "pods", "-l", "app=shop", "-o",
		`jsonpath={range .items[*]}{.spec.initContainers[*].name} {.spec.initContainers[*].restartPolicy} {.spec.containers[*].name}|{.spec.initContainers[?(@.name=="envoy")].args}{"\n"}{end}`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("pods of shop: %q", out)
	}
	for _, l := range lines {
		containers, args, _ := strings.Cut(l, "|")
		// The sidecar is a native sidecar: an init container that keeps
		// running, started before the application.
		if containers != "envoy Always shop" || !strings.Contains(args, ns+"/shop-mesh") {
			t.Errorf("a pod of shop has init containers, their restart policy and containers %q, and envoy args %s; want envoy Always shop, and an envoy of %s/shop-mesh", containers, args, ns)
		}
	}

	c := dialAsFleet(t, ns, "shop-mesh")
	fleet := ns + "/shop-mesh"
	listeners := served(t, c, fleet, resourcev3.ListenerType)
	if got := keys(listeners); !slices.Equal(got, []string{"inbound"}) {
		t.Errorf("the sidecars are served listeners %v, want inbound", got)
	}
	clusters := served(t, c, fleet, resourcev3.ClusterType)
	local, _ := clusters["shop-local"].(*clusterv3.Cluster)
	var addrs []string
	for _, loc := range local.GetLoadAssignment().GetEndpoints() {
		for _, e := range loc.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			addrs = append(addrs, fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
		}
	}
	if !slices.Equal(addrs, []string{"127.0.0.1:8080"}) {
		t.Errorf("cluster shop-local goes to %v, want the application on 127.0.0.1:8080", addrs)
	}
}

// The proxyless gRPC sample, applied unchanged: a client that presents the
// fleet's certificate and subscribes as gRPC does, by name, to the
// listener its target names, then to what that names, is served each, and
// counts as a proxy of the fleet that accepted its configuration.
func TestProxylessSample(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "e2e-grpc-sample")
	kubectl.Run(t, "-n", ns, "apply", "-f", sample("example_v1_envoyconfig_grpc.yaml"))
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/greeter-routes", `{.status.conditions[?(@.type=="Accepted")].status}`, "True")
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/greeter-routes", `{.status.conditions[?(@.type=="Degraded")].status}`, "False")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "deployment/greeter", "{.status.availableReplicas}", "2")

	fleet := ns + "/greeter-mesh"
	a := xdstest.OpenADS(t, dialAsFleet(t, ns, "greeter-mesh"), fleet, "greeter-client")
	expect := func(typ, name string) proto.Message {
		t.Helper()
		if err := a.Subscribe(typ, name); err != nil {
			t.Fatal(err)
		}
		for {
			resp, err := a.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Ack(resp); err != nil {
				t.Fatal(err)
			}
			if resp.GetTypeUrl() != typ {
				continue
			}
			if len(resp.GetResources()) != 1 {
				t.Fatalf("subscribed to %s %s: sent %d resources", typ, name, len(resp.GetResources()))
			}
			m, err := resp.GetResources()[0].UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			if got := cachev3.GetResourceName(m); got != name {
				t.Fatalf("subscribed to %s %s: sent %s", typ, name, got)
			}
			return m
		}
	}
	l := expect(resourcev3.ListenerType, "greeter").(*listenerv3.Listener)
	if l.GetApiListener() == nil {
		t.Errorf("listener greeter has no api_listener")
	}
	if got := firstRoute(t, expect(resourcev3.RouteType, "greeter")).GetCluster(); got != "greeter" {
		t.Errorf("route greeter goes to %q, want cluster greeter", got)
	}
	expect(resourcev3.ClusterType, "greeter")
	// The endpoints are the Service's ready pods: a later response may
	// bring the second one.
	cla := expect(resourcev3.EndpointType, "greeter").(*endpointv3.ClusterLoadAssignment)
	for count(t, cla) != 2 {
		resp, err := a.Recv()
		if err != nil {
			t.Fatalf("cluster greeter has %d endpoints, want the Service's 2 pods: %v", count(t, cla), err)
		}
		if err := a.Ack(resp); err != nil {
			t.Fatal(err)
		}
		if resp.GetTypeUrl() == resourcev3.EndpointType && len(resp.GetResources()) == 1 {
			cla = &endpointv3.ClusterLoadAssignment{}
			if err := resp.GetResources()[0].UnmarshalTo(cla); err != nil {
				t.Fatal(err)
			}
		}
	}
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/greeter-routes", "{.status.proxies.acked}", "1")
}

// count returns the endpoints of cla, and fails a locality without the
// weight proxyless gRPC requires.
func count(t *testing.T, cla *endpointv3.ClusterLoadAssignment) int {
	t.Helper()
	n := 0
	for _, loc := range cla.GetEndpoints() {
		if loc.GetLocality() == nil || loc.GetLoadBalancingWeight().GetValue() == 0 {
			t.Errorf("endpoints without the locality and weight gRPC requires: %v", loc)
		}
		n += len(loc.GetLbEndpoints())
	}
	return n
}
