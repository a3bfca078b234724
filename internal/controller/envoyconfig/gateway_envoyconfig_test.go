package envoyconfig

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// tcpListener is a listener on 0.0.0.0:port whose TCP proxy sends to
// cluster.
func tcpListener(name string, port int, cluster string) runtime.RawExtension {
	return raw(fmt.Sprintf(`{"name": %q, "address": {"socket_address": {"address": "0.0.0.0", "port_value": %d}},
		"filter_chains": [{"filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
		"stat_prefix": "tcp", "cluster": %q}}]}]}`, name, port, cluster))
}

// servedListeners returns the fleet's listeners, by name, as the port they
// listen on.
func servedListeners(fleetID string) map[string]uint32 {
	out := map[string]uint32{}
	for _, r := range xdsServer.Resources(fleetID)[resourcev3.ListenerType] {
		l := r.(*listenerv3.Listener)
		out[l.GetName()] = l.GetAddress().GetSocketAddress().GetPortValue()
	}
	return out
}

// servedRouteClusters returns, for the route configuration named rc that
// the fleet serves, the cluster of each route of each virtual host, by
// the virtual host's first domain.
func servedRouteClusters(fleetID, rc string) map[string][]string {
	out := map[string][]string{}
	for _, r := range xdsServer.Resources(fleetID)[resourcev3.RouteType] {
		if r.(*routev3.RouteConfiguration).GetName() != rc {
			continue
		}
		for _, vh := range r.(*routev3.RouteConfiguration).GetVirtualHosts() {
			for _, rt := range vh.GetRoutes() {
				out[vh.GetDomains()[0]] = append(out[vh.GetDomains()[0]], rt.GetRoute().GetCluster())
			}
		}
	}
	return out
}

// servedClusters returns the names of the fleet's clusters.
func servedClusters(fleetID string) []string {
	var out []string
	for _, r := range xdsServer.Resources(fleetID)[resourcev3.ClusterType] {
		out = append(out, r.(interface{ GetName() string }).GetName())
	}
	return out
}

// An EnvoyConfig may target a Gateway's fleet (spec.envoyRef: the
// Gateway's name) for what the Gateway API cannot say: its resources are
// served beside the Gateway's. One that names a resource as the Gateway's
// Config does loses it, though it is older than the Gateway and its name
// sorts first: it is told so, naming the Gateway, and the Gateway's routes
// go on being served and programmed.
func TestGatewayFleetTakesEnvoyConfigs(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	gwListener := ns + "/edge/80"
	gwCluster := ns + "/edge/" + ns + "/web/8080"

	// Before the Gateway: a listener and a route configuration with the
	// names of the Gateway's (its listener on another port), whose route
	// for the Gateway's host goes to a cluster of its own.
	early := newConfig(ns, "early", cluster("shadow", "1s"))
	early.Spec.Resources.Listeners = []runtime.RawExtension{raw(fmt.Sprintf(`{"name": %q,
		"address": {"socket_address": {"address": "0.0.0.0", "port_value": 9001}},
		"filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
			"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
			"stat_prefix": "early", "rds": {"route_config_name": %q, "config_source": {"ads": {}, "resource_api_version": "V3"}},
			"http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`,
		gwListener, gwListener))}
	early.Spec.Resources.Routes = []runtime.RawExtension{raw(fmt.Sprintf(`{"name": %q, "virtual_hosts": [{"name": "good",
		"domains": ["good.example.com"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "shadow"}}]}]}`, gwListener))}
	create(t, early) // older than the Gateway, or as old and first by name

	gw, fleetID := gatewayFleet(t, ns, gatewayClass(t))
	backend(t, ns, "web")
	good := httpRoute(ns, "good", "good.example.com", "web")
	create(t, good)
	// After it: a cluster and a listener on another port.
	extra := newConfig(ns, "extra", cluster("extra", "1s"))
	extra.Spec.Resources.Listeners = []runtime.RawExtension{tcpListener("extra", 9000, "extra")}
	create(t, extra)

	testenv.Eventually(t, "the fleet to serve the Gateway's and the EnvoyConfigs' resources", func() (bool, error) {
		ls, routes, clusters := servedListeners(fleetID), servedRouteClusters(fleetID, gwListener), servedClusters(fleetID)
		ok := ls[gwListener] == 10080 && ls["extra"] == 9000 && len(ls) == 2 &&
			slices.Equal(routes["good.example.com"], []string{gwCluster}) &&
			slices.Contains(clusters, gwCluster) && slices.Contains(clusters, "extra") && slices.Contains(clusters, "shadow")
		return ok, fmt.Errorf("listeners %v, routes %v, clusters %v", ls, routes, clusters)
	})

	got := waitStatus(t, extra, "the EnvoyConfig beside the Gateway to be served", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Status == metav1.ConditionTrue &&
			condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionTrue &&
			condition(c, examplev1.EnvoyConfigConditionDegraded).Status == metav1.ConditionFalse
	})
	if d := condition(got, examplev1.EnvoyConfigConditionDegraded); d.Reason != examplev1.EnvoyConfigReasonAsExpected {
		t.Errorf("Degraded = %+v", d)
	}
	got = waitStatus(t, early, "the clashing EnvoyConfig to be told", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionDegraded).Reason == examplev1.EnvoyConfigReasonNameClash
	})
	msg := condition(got, examplev1.EnvoyConfigConditionDegraded).Message
	for _, want := range []string{
		fmt.Sprintf("listener %q (spec.resources.listeners[0]) is also defined by Gateway %s/edge, whose resources win", gwListener, ns),
		fmt.Sprintf("route configuration %q (spec.resources.routes[0]) is also defined by Gateway %s/edge, whose resources win", gwListener, ns),
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Degraded message %q\nwant it to say %q", msg, want)
		}
	}

	routeParent(t, good, hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, ""))
	p := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	clusterNames(t, p, "")
	waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		return hasCondition(string(gwv1.GatewayConditionProgrammed), metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed))(g.Status.Conditions)
	})

	// The EnvoyConfig beside the Gateway goes: the Gateway is served as it
	// was.
	if err := suite.Client.Delete(ctx, extra); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the fleet to stop serving the deleted EnvoyConfig", func() (bool, error) {
		ls, routes := servedListeners(fleetID), servedRouteClusters(fleetID, gwListener)
		_, stale := ls["extra"]
		return !stale && ls[gwListener] == 10080 && slices.Equal(routes["good.example.com"], []string{gwCluster}),
			fmt.Errorf("listeners %v, routes %v", ls, routes)
	})
}

// An EnvoyConfig's listener on the address of a Gateway's (port 80, which
// the proxies listen for on 10080) loses it, though it was published on
// the fleet before the Gateway came: it is not served, and says why,
// naming the Gateway; the Gateway's listener and routes are served.
func TestGatewayListenerAddressWinsOverEnvoyConfig(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}}
	create(t, e)
	taker := newConfig(ns, "taker", cluster("mine", "1s"))
	taker.Spec.Resources.Listeners = []runtime.RawExtension{tcpListener("taker", 10080, "mine")}
	create(t, taker)
	fleetID := ns + "/edge"
	waitStatus(t, taker, "the EnvoyConfig to be published before the Gateway", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Reason == examplev1.EnvoyConfigReasonPublished
	})
	if ls := servedListeners(fleetID); ls["taker"] != 10080 {
		t.Fatalf("listeners %v, want taker on 10080", ls)
	}

	// The Gateway comes and takes the fleet, as the Gateway controller
	// would adopt it.
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(gatewayClass(t)), Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
		}},
	}
	create(t, gw)
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(e), e); err != nil {
		t.Fatal(err)
	}
	e.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(gw, gwv1.SchemeGroupVersion.WithKind("Gateway"))}
	if err := suite.Client.Update(ctx, e); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: e.Name, Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(e, examplev1.GroupVersion.WithKind("Envoy"))}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "gw-80", Port: 80, TargetPort: intstr.FromInt32(10080)}}},
	}
	create(t, svc)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.1.0.8"}}
	if err := suite.Client.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	backend(t, ns, "web")
	good := httpRoute(ns, "good", "good.example.com", "web")
	create(t, good)

	gwListener := ns + "/edge/80"
	testenv.Eventually(t, "the fleet to serve the Gateway's listener instead of the EnvoyConfig's", func() (bool, error) {
		ls, hosts := servedListeners(fleetID), servedHosts(t, fleetID)
		_, stale := ls["taker"]
		return !stale && ls[gwListener] == 10080 && slices.Contains(hosts, "good.example.com"), fmt.Errorf("listeners %v, hosts %v", ls, hosts)
	})
	got := waitStatus(t, taker, "the EnvoyConfig to say it lost the address", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonInvalidResources &&
			condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionFalse
	})
	want := fmt.Sprintf(`spec.resources.listeners[0] ("taker"): address: 0.0.0.0:10080 is also the address of listener spec.resources.listeners[0] (%q) of Gateway %s/edge`, gwListener, ns)
	if a := condition(got, examplev1.EnvoyConfigConditionAccepted); !strings.Contains(a.Message, want) || !strings.Contains(a.Message, "a Gateway's listener wins") {
		t.Errorf("Accepted = %+v\nwant it to say %q", a, want)
	}
	if p := condition(got, examplev1.EnvoyConfigConditionPublished); !strings.Contains(p.Message, "none of it is served") {
		t.Errorf("Published = %+v, want none of it served", p)
	}
	if cs := servedClusters(fleetID); slices.Contains(cs, "mine") {
		t.Errorf("clusters %v: the EnvoyConfig that lost is served in part", cs)
	}

	routeParent(t, good, hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, ""))
	p := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	clusterNames(t, p, "")
	waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		return hasCondition(string(gwv1.GatewayConditionProgrammed), metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed))(g.Status.Conditions)
	})
}

// An EnvoyConfig may use what a Gateway serves (here, a TCP proxy to the
// cluster of a route's backend), but it goes with the route: when the
// route is deleted, the Gateway's change is served, not held for the
// EnvoyConfig, which is not served and says why, naming the Gateway.
func TestGatewayChangeWinsOverEnvoyConfigUsingIt(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	_, fleetID := gatewayFleet(t, ns, gatewayClass(t))
	backend(t, ns, "web")
	good := httpRoute(ns, "good", "good.example.com", "web")
	create(t, good)
	gwCluster := ns + "/edge/" + ns + "/web/8080"
	testenv.Eventually(t, "the fleet to serve the route's cluster", func() (bool, error) {
		cs := servedClusters(fleetID)
		return slices.Contains(cs, gwCluster), fmt.Errorf("clusters %v", cs)
	})
	uses := newConfig(ns, "uses", cluster("own", "1s"))
	uses.Spec.Resources.Listeners = []runtime.RawExtension{tcpListener("uses", 9000, gwCluster)}
	create(t, uses)
	waitStatus(t, uses, "the EnvoyConfig using the Gateway's cluster to be published", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Reason == examplev1.EnvoyConfigReasonPublished
	})

	if err := suite.Client.Delete(ctx, good); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the fleet to serve the Gateway without the deleted route", func() (bool, error) {
		ls, hosts, cs := servedListeners(fleetID), servedHosts(t, fleetID), servedClusters(fleetID)
		_, stale := ls["uses"]
		return !stale && ls[ns+"/edge/80"] == 10080 && !slices.Contains(hosts, "good.example.com") && !slices.Contains(cs, gwCluster) && !slices.Contains(cs, "own"),
			fmt.Errorf("listeners %v, hosts %v, clusters %v", ls, hosts, cs)
	})
	got := waitStatus(t, uses, "the EnvoyConfig to say what it lost", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonReferencesMissing
	})
	a := condition(got, examplev1.EnvoyConfigConditionAccepted)
	for _, want := range []string{
		fmt.Sprintf(`spec.resources.listeners[0] ("uses"): cluster %q does not exist`, gwCluster),
		fmt.Sprintf("Gateway %s/edge does not serve it", ns),
		"none of it is served",
	} {
		if !strings.Contains(a.Message, want) {
			t.Errorf("Accepted message %q\nwant it to say %q", a.Message, want)
		}
	}
}
