package envoyconfig

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// answerRoutes receives the proxy's route configuration responses and
// answers each, NACKing with detail those that hold the regular
// expression regex, until one that it ACKs satisfies done.
func answerRoutes(t *testing.T, p *xdstest.Proxy, regex, detail string, done func(*routev3.RouteConfiguration) bool) {
	t.Helper()
	type received struct {
		resp *discoveryv3.DiscoveryResponse
		err  error
	}
	for {
		ch := make(chan received, 1)
		go func() {
			resp, err := p.Stream.Recv()
			ch <- received{resp, err}
		}()
		var got received
		select {
		case got = <-ch:
		case <-time.After(testenv.Timeout):
			t.Fatalf("no route configuration came in %v", testenv.Timeout)
		}
		if got.err != nil {
			t.Fatal(got.err)
		}
		var rcs []*routev3.RouteConfiguration
		nack := ""
		for _, a := range got.resp.GetResources() {
			rc := &routev3.RouteConfiguration{}
			if err := a.UnmarshalTo(rc); err != nil {
				t.Fatal(err)
			}
			rcs = append(rcs, rc)
			for _, vh := range rc.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					if r.GetMatch().GetSafeRegex().GetRegex() == regex {
						nack = detail
					}
				}
			}
		}
		if err := p.Answer(got.resp, nack); err != nil {
			t.Fatal(err)
		}
		if nack == "" && len(rcs) == 1 && done(rcs[0]) {
			return
		}
	}
}

// routeServed reports whether rc serves, in its virtual host host, the
// Envoy route name with the path prefix path.
func routeServed(rc *routev3.RouteConfiguration, host, name, path string) bool {
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if vh.GetName() == host && r.GetName() == name && r.GetMatch().GetPrefix()+r.GetMatch().GetPathSeparatedPrefix() == path {
				return true
			}
		}
	}
	return false
}

// When every proxy rejects a version of the Gateway's route configuration
// and names a route's rules, that route's change is withheld alone: the
// route keeps its earlier rules, says why, and the Gateway's other
// routes' changes are served, rather than the Gateway's whole change held
// back.
func TestGatewayRouteEveryProxyRejectsIsWithheldAlone(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	_, fleetID := gatewayFleet(t, ns, gatewayClass(t))
	backend(t, ns, "web")
	good := httpRoute(ns, "good", "good.example.com", "web")
	create(t, good)
	picky := httpRoute(ns, "picky", "picky.example.com", "web")
	create(t, picky)
	accepted := hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, "")
	routeParent(t, good, accepted)
	routeParent(t, picky, accepted)
	pickyRule := "HTTPRoute/" + ns + "/picky/rule/0/match/0"
	goodRule := "HTTPRoute/" + ns + "/good/rule/0/match/0"
	p := xdstest.Connect(t, dialFleet(t, xdsClient(t), fleetID), fleetID, "pod-1", resourcev3.RouteType, ns+"/edge/80")
	const regex = "/re/[0-9]+"
	const said = "regex '/re/[0-9]+' RE2 program size of 402 > max program size of 100 set for the error level threshold. Increase configured max program size if necessary."
	answerRoutes(t, p, regex, said, func(rc *routev3.RouteConfiguration) bool {
		return routeServed(rc, "picky.example.com", pickyRule, "/") && routeServed(rc, "good.example.com", goodRule, "/")
	})

	// picky's change is one the proxy rejects.
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(picky), picky); err != nil {
		t.Fatal(err)
	}
	picky.Spec.Rules[0].Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchRegularExpression), Value: ptr.To(regex)}}}
	if err := suite.Client.Update(ctx, picky); err != nil {
		t.Fatal(err)
	}
	answerRoutes(t, p, regex, said, func(rc *routev3.RouteConfiguration) bool {
		return routeServed(rc, "picky.example.com", pickyRule, "/")
	})
	// Once withheld alone, the route says so.
	routeParent(t, picky, func(cs []metav1.Condition) bool {
		a := meta.FindStatusCondition(cs, string(gwv1.RouteConditionAccepted))
		return a.Status == metav1.ConditionFalse && a.Reason == ReasonRejectedByProxies && strings.Contains(a.Message, said) &&
			strings.Contains(a.Message, "every proxy rejected the route's rules of generation 2") && strings.Contains(a.Message, "keeps serving the route's rules of generation 1")
	})

	// good's change is served beside picky's earlier rules.
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(good), good); err != nil {
		t.Fatal(err)
	}
	good.Spec.Rules[0].Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/v2")}}}
	if err := suite.Client.Update(ctx, good); err != nil {
		t.Fatal(err)
	}
	answerRoutes(t, p, regex, said, func(rc *routev3.RouteConfiguration) bool {
		return routeServed(rc, "good.example.com", goodRule, "/v2") && routeServed(rc, "picky.example.com", pickyRule, "/")
	})
	routeParent(t, good, accepted)
}
