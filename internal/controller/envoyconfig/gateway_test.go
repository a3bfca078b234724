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
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// gatewayClass creates a GatewayClass of this operator's.
func gatewayClass(t *testing.T) string {
	t.Helper()
	c := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "kec-"}, Spec: gwv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
	create(t, c)
	t.Cleanup(func() { _ = suite.Client.Delete(context.Background(), c) })
	return c.Name
}

// gatewayFleet creates a Gateway with one HTTP listener on port 80 and the
// fleet the Gateway controller would give it (which does not run here): an
// Envoy the Gateway controls, and its Service with a load-balancer address.
func gatewayFleet(t *testing.T, ns, class string) (*gwv1.Gateway, string) {
	t.Helper()
	ctx := context.Background()
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class), Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
		}},
	}
	create(t, gw)
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gateway.FleetName(gw.Name),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(gw, gwv1.SchemeGroupVersion.WithKind("Gateway"))}}}
	create(t, e)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: e.Name, Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(e, examplev1.GroupVersion.WithKind("Envoy"))}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "gw-80", Port: 80, TargetPort: intstr.FromInt32(10080)}}},
	}
	create(t, svc)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.1.0.7"}}
	if err := suite.Client.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	return gw, ns + "/" + e.Name
}

// backend creates a Service web, port 8080 to the pods' 3000, with one
// ready endpoint.
func backend(t *testing.T, ns, name string) {
	t.Helper()
	create(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(3000)}}},
	})
	create(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](3000)}},
	})
}

func httpRoute(ns, name, host string, backendName string) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(backendName), Port: ptr.To[gwv1.PortNumber](8080)},
			}}}}},
		},
	}
}

// routeParent waits until the route's status has this operator's parent
// entry for the Gateway edge, with its conditions of the route's generation,
// and cond holds for them.
func routeParent(t *testing.T, rt *gwv1.HTTPRoute, cond func([]metav1.Condition) bool) gwv1.RouteParentStatus {
	t.Helper()
	var got gwv1.RouteParentStatus
	testenv.Eventually(t, "HTTPRoute "+rt.Name+"'s parent status", func() (bool, error) {
		now := &gwv1.HTTPRoute{}
		if err := suite.Client.Get(context.Background(), client.ObjectKeyFromObject(rt), now); err != nil {
			return false, err
		}
		for _, p := range now.Status.Parents {
			if p.ControllerName == gateway.ControllerName && p.ParentRef.Name == "edge" {
				got = p
				a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
				return a != nil && a.ObservedGeneration == now.Generation && cond(p.Conditions), fmt.Errorf("parents %+v", now.Status.Parents)
			}
		}
		return false, fmt.Errorf("parents %+v", now.Status.Parents)
	})
	return got
}

func hasCondition(typ string, status metav1.ConditionStatus, reason string) func([]metav1.Condition) bool {
	return func(cs []metav1.Condition) bool {
		c := meta.FindStatusCondition(cs, typ)
		return c != nil && c.Status == status && (reason == "" || c.Reason == reason)
	}
}

// servedHosts returns the domains of the virtual hosts the fleet serves.
func servedHosts(t *testing.T, fleetID string) []string {
	t.Helper()
	var out []string
	for _, r := range xdsServer.Resources(fleetID)[resourcev3.RouteType] {
		for _, vh := range r.(*routev3.RouteConfiguration).GetVirtualHosts() {
			out = append(out, vh.GetDomains()...)
		}
	}
	return out
}

// A Gateway's HTTPRoutes go through the fleet's pipeline as an EnvoyConfig's
// content does: the fleet serves a listener on the Gateway's port, the
// routes' hosts and their backend's cluster; the Gateway and the routes get
// the Gateway API's status; Programmed waits for the proxies' ACK.
func TestGatewayRoutesAreServedAndReported(t *testing.T) {
	ns := suite.Namespace(t)
	gw, fleetID := gatewayFleet(t, ns, gatewayClass(t))
	backend(t, ns, "web")
	good := httpRoute(ns, "good", "good.example.com", "web")
	create(t, good)
	missing := httpRoute(ns, "missing", "missing.example.com", "nowhere")
	create(t, missing)

	routeParent(t, good, func(cs []metav1.Condition) bool {
		return hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, "")(cs) &&
			hasCondition(string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, "")(cs)
	})
	routeParent(t, missing, hasCondition(string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonBackendNotFound)))

	testenv.Eventually(t, "the fleet to serve the routes' hosts", func() (bool, error) {
		hosts := servedHosts(t, fleetID)
		return slices.Contains(hosts, "good.example.com") && slices.Contains(hosts, "missing.example.com"), fmt.Errorf("hosts %v", hosts)
	})
	var ports []uint32
	for _, r := range xdsServer.Resources(fleetID)[resourcev3.ListenerType] {
		ports = append(ports, r.(*listenerv3.Listener).GetAddress().GetSocketAddress().GetPortValue())
	}
	if !slices.Equal(ports, []uint32{10080}) {
		t.Errorf("the fleet listens on %v, want the Gateway's port 80 at 10080", ports)
	}

	// No proxy yet: accepted, with its address, but not programmed.
	got := waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		// Once the cache holds both routes.
		return hasCondition(string(gwv1.GatewayConditionAccepted), metav1.ConditionTrue, "")(g.Status.Conditions) &&
			hasCondition(string(gwv1.GatewayConditionProgrammed), metav1.ConditionFalse, string(gwv1.GatewayReasonPending))(g.Status.Conditions) &&
			len(g.Status.Listeners) == 1 && g.Status.Listeners[0].AttachedRoutes == 2
	})
	if len(got.Status.Addresses) != 1 || got.Status.Addresses[0].Value != "127.1.0.7" {
		t.Errorf("addresses = %+v, want the Service's load-balancer address", got.Status.Addresses)
	}
	if len(got.Status.Listeners) != 1 || got.Status.Listeners[0].AttachedRoutes != 2 {
		t.Errorf("listeners = %+v, want http with 2 attached routes", got.Status.Listeners)
	}

	// A proxy acknowledges: the Gateway and its listener are programmed.
	p := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	clusterNames(t, p, "")
	got = waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		return hasCondition(string(gwv1.GatewayConditionProgrammed), metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed))(g.Status.Conditions) &&
			len(g.Status.Listeners) == 1 && hasCondition(string(gwv1.ListenerConditionProgrammed), metav1.ConditionTrue, "")(g.Status.Listeners[0].Conditions)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, string(gwv1.GatewayConditionProgrammed)); !strings.Contains(c.Message, "acknowledged") {
		t.Errorf("Programmed = %+v", c)
	}
	// Settled, the Gateway and its routes cost the API server nothing.
	suite.ExpectNoWrites(t, ControllerName, gw, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "edge"}})
}

// waitGateway waits until the Gateway's status is of its generation and
// cond holds.
func waitGateway(t *testing.T, gw *gwv1.Gateway, cond func(*gwv1.Gateway) bool) *gwv1.Gateway {
	t.Helper()
	got := &gwv1.Gateway{}
	testenv.Eventually(t, "Gateway "+gw.Name+"'s status", func() (bool, error) {
		if err := suite.Client.Get(context.Background(), client.ObjectKeyFromObject(gw), got); err != nil {
			return false, err
		}
		a := meta.FindStatusCondition(got.Status.Conditions, string(gwv1.GatewayConditionAccepted))
		return a != nil && a.ObservedGeneration == got.Generation && cond(got), fmt.Errorf("status %+v", got.Status)
	})
	return got
}

// A route whose content Envoy would refuse (a regular expression too large
// for its RE2, which Go's compiles; the rules find it before Envoy runs) is
// withheld from it alone: it says why, and the Gateway's other route is
// served and programmed. A route a real Envoy refuses goes the same way
// (isolateRoutes), with Envoy's words.
func TestGatewayRefusedRouteIsWithheldAlone(t *testing.T) {
	ns := suite.Namespace(t)
	gw, fleetID := gatewayFleet(t, ns, gatewayClass(t))
	backend(t, ns, "web")
	good := httpRoute(ns, "good", "good.example.com", "web")
	create(t, good)
	greedy := httpRoute(ns, "greedy", "greedy.example.com", "web")
	greedy.Spec.Rules[0].Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{
		Type: ptr.To(gwv1.PathMatchRegularExpression), Value: ptr.To("/(alpha|beta|gamma|delta|epsilon){20}[0-9a-f]{40}"),
	}}}
	create(t, greedy)

	p := routeParent(t, greedy, hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonUnsupportedValue)))
	if a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); !strings.Contains(a.Message, "over Envoy's limit") {
		t.Errorf("Accepted = %+v, want why", a)
	}
	routeParent(t, good, hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, ""))
	testenv.Eventually(t, "the fleet to serve the good route alone", func() (bool, error) {
		hosts := servedHosts(t, fleetID)
		return slices.Contains(hosts, "good.example.com") && !slices.Contains(hosts, "greedy.example.com"), fmt.Errorf("hosts %v", hosts)
	})
	pr := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	clusterNames(t, pr, "")
	waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		return hasCondition(string(gwv1.GatewayConditionProgrammed), metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed))(g.Status.Conditions)
	})
}

// A route that stops naming the Gateway loses this operator's parent entry
// for it, and the fleet stops serving it.
func TestGatewayRouteDetachedLosesItsParent(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	_, fleetID := gatewayFleet(t, ns, gatewayClass(t))
	backend(t, ns, "web")
	rt := httpRoute(ns, "good", "good.example.com", "web")
	create(t, rt)
	routeParent(t, rt, hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, ""))
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(rt), rt); err != nil {
		t.Fatal(err)
	}
	rt.Spec.ParentRefs = []gwv1.ParentReference{{Name: "elsewhere"}}
	if err := suite.Client.Update(ctx, rt); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the route's parent entry for the Gateway to go", func() (bool, error) {
		now := &gwv1.HTTPRoute{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(rt), now); err != nil {
			return false, err
		}
		return len(now.Status.Parents) == 0, fmt.Errorf("parents %+v", now.Status.Parents)
	})
	testenv.Eventually(t, "the fleet to stop serving the route", func() (bool, error) {
		hosts := servedHosts(t, fleetID)
		return !slices.Contains(hosts, "good.example.com"), fmt.Errorf("hosts %v", hosts)
	})
}
