package envoyconfig

import (
	"fmt"
	"strings"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// A proxy's NACK of the Gateway's route configuration that names a route's
// rules (here, its regular expression, in the words of an Envoy whose
// limit on them is lower than the judge's) is reported on that route; the
// Gateway's other route stays Accepted, and the Gateway's Programmed says
// whose rules were rejected. A NACK that names no route's is the
// Gateway's: its Programmed gives the proxy's words, and the route is
// Accepted again.
func TestGatewayNACKIsAttributedToTheRoute(t *testing.T) {
	ns := suite.Namespace(t)
	gw, fleetID := gatewayFleet(t, ns, gatewayClass(t))
	backend(t, ns, "web")
	good := httpRoute(ns, "good", "good.example.com", "web")
	create(t, good)
	picky := httpRoute(ns, "picky", "picky.example.com", "web")
	picky.Spec.Rules[0].Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchRegularExpression), Value: ptr.To("/re/[0-9]+")}}}
	create(t, picky)
	accepted := hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, "")
	routeParent(t, good, accepted)
	routeParent(t, picky, accepted)
	testenv.Eventually(t, "the fleet to serve both routes", func() (bool, error) {
		g, p := servedRoutes(fleetID, ns, "good"), servedRoutes(fleetID, ns, "picky")
		return len(g) == 1 && len(p) == 1, fmt.Errorf("served %v and %v", g, p)
	})

	addr := xdsClient(t)
	rc := ns + "/edge/80"
	if _, err := xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-1", resourcev3.RouteType, rc).Next(""); err != nil {
		t.Fatal(err)
	}
	const said = "regex '/re/[0-9]+' RE2 program size of 402 > max program size of 100 set for the error level threshold. Increase configured max program size if necessary."
	if _, err := xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-2", resourcev3.RouteType, rc).Next(said); err != nil {
		t.Fatal(err)
	}
	p := routeParent(t, picky, hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, ReasonRejectedByProxies))
	if a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); !strings.Contains(a.Message, said) ||
		!strings.Contains(a.Message, "rules of generation 1 (HTTPRoute/"+ns+"/picky/rule/0/match/0)") {
		t.Errorf("Accepted = %+v, want the proxies' words and the rules they name", a)
	}
	routeParent(t, good, accepted)
	waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		c := meta.FindStatusCondition(g.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "names the rules of HTTPRoute "+ns+"/picky (generation 1)")
	})

	// Another proxy rejects it for what names no route: the Gateway's.
	const weights = "Sum of weights in the weighted_cluster must be greater than 0."
	if _, err := xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-3", resourcev3.RouteType, rc).Next(weights); err != nil {
		t.Fatal(err)
	}
	waitGateway(t, gw, func(g *gwv1.Gateway) bool {
		c := meta.FindStatusCondition(g.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "the proxies rejected it: "+weights)
	})
	routeParent(t, picky, accepted)
}
