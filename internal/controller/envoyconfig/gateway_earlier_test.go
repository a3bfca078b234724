package envoyconfig

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// servedRoutes returns, by virtual host, the Envoy routes the fleet is
// served of the route ns/name: "<name> <path> generation <n>" each.
func servedRoutes(fleetID, ns, name string) map[string][]string {
	out := map[string][]string{}
	for _, r := range xdsServer.Resources(fleetID)[resourcev3.RouteType] {
		for _, vh := range r.(*routev3.RouteConfiguration).GetVirtualHosts() {
			for _, rt := range vh.GetRoutes() {
				md := rt.GetMetadata().GetFilterMetadata()[gateway.MetadataKey].GetFields()
				if md["namespace"].GetStringValue() != ns || md["name"].GetStringValue() != name {
					continue
				}
				m := rt.GetMatch()
				path := m.GetPrefix() + m.GetPathSeparatedPrefix() + m.GetPath() + m.GetSafeRegex().GetRegex()
				out[vh.GetName()] = append(out[vh.GetName()], fmt.Sprintf("%s %s generation %d", rt.GetName(), path, int64(md["generation"].GetNumberValue())))
			}
		}
	}
	return out
}

// A route that serves keeps serving its rules when a change of it is
// refused (a regular expression over Envoy's limit, which the rules find
// before Envoy runs; a real Envoy's refusal goes the same way): its status
// says why, and which generation is served; the Gateway's other route is
// untouched. Its next good change is served.
func TestGatewayRefusedRouteKeepsItsEarlierRules(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	_, fleetID := gatewayFleet(t, ns, gatewayClass(t))
	backend(t, ns, "web")
	good := httpRoute(ns, "good", "good.example.com", "web")
	create(t, good)
	edited := httpRoute(ns, "edited", "edited.example.com", "web")
	create(t, edited)
	accepted := hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, "")
	routeParent(t, good, accepted)
	routeParent(t, edited, accepted)
	want := fmt.Sprintf("HTTPRoute/%s/edited/rule/0/match/0 / generation 1", ns)
	testenv.Eventually(t, "the fleet to serve the route", func() (bool, error) {
		got := servedRoutes(fleetID, ns, "edited")
		return len(got) == 1 && len(got["edited.example.com"]) == 1 && got["edited.example.com"][0] == want, fmt.Errorf("served %v", got)
	})
	goodBefore := servedRoutes(fleetID, ns, "good")

	// A bad edit: its rule now matches by a regular expression Envoy refuses.
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(edited), edited); err != nil {
		t.Fatal(err)
	}
	edited.Spec.Rules[0].Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{
		Type: ptr.To(gwv1.PathMatchRegularExpression), Value: ptr.To("/(alpha|beta|gamma|delta|epsilon){20}[0-9a-f]{40}"),
	}}}
	if err := suite.Client.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	p := routeParent(t, edited, hasCondition(string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonUnsupportedValue)))
	if a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); !strings.Contains(a.Message, "over Envoy's limit") ||
		!strings.Contains(a.Message, "the fleet keeps serving the route's rules of generation 1") {
		t.Errorf("Accepted = %+v, want why, and the generation served", a)
	}
	// Settled: the old path is still served, and the other route as it was.
	testenv.Consistently(t, 2*time.Second, func() error {
		if got := servedRoutes(fleetID, ns, "edited"); len(got) != 1 || len(got["edited.example.com"]) != 1 || got["edited.example.com"][0] != want {
			return fmt.Errorf("served %v, want %s", got, want)
		}
		if got := servedRoutes(fleetID, ns, "good"); fmt.Sprint(got) != fmt.Sprint(goodBefore) {
			return fmt.Errorf("the other route is served %v, was %v", got, goodBefore)
		}
		return nil
	})
	routeParent(t, good, accepted)

	// A good edit is served.
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(edited), edited); err != nil {
		t.Fatal(err)
	}
	edited.Spec.Rules[0].Matches = []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/v2")}}}
	if err := suite.Client.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	routeParent(t, edited, accepted)
	want = fmt.Sprintf("HTTPRoute/%s/edited/rule/0/match/0 /v2 generation 3", ns)
	testenv.Eventually(t, "the fleet to serve the good edit", func() (bool, error) {
		got := servedRoutes(fleetID, ns, "edited")
		return len(got) == 1 && len(got["edited.example.com"]) == 1 && got["edited.example.com"][0] == want, fmt.Errorf("served %v", got)
	})
}
