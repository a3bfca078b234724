package gateway

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// otherController names another implementation's entries in a route's
// status, which this operator never touches.
const otherController gwv1.GatewayController = "example.net/gateway-controller"

// parentStatus is a route's status entry for the Gateway name of
// namespace ns, written by controller.
func parentStatus(ns, name string, controller gwv1.GatewayController) gwv1.RouteParentStatus {
	return gwv1.RouteParentStatus{
		ParentRef:      gwv1.ParentReference{Namespace: ptr.To(gwv1.Namespace(ns)), Name: gwv1.ObjectName(name)},
		ControllerName: controller,
		Conditions: []metav1.Condition{{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
			Reason: string(gwv1.RouteReasonAccepted), Message: "accepted", LastTransitionTime: metav1.Now()}},
	}
}

// entries names a route's status entries as "controller ns/name".
func entries(parents []gwv1.RouteParentStatus) []string {
	var out []string
	for _, p := range parents {
		out = append(out, string(p.ControllerName)+" "+string(ptr.Deref(p.ParentRef.Namespace, ""))+"/"+string(p.ParentRef.Name))
	}
	slices.Sort(out)
	return out
}

// A Gateway that is gone leaves no entry of ours in its routes' status:
// when it is deleted, its entries are taken out of every HTTPRoute and
// GRPCRoute, and the entries of another Gateway, or of another controller
// for the same Gateway, stay. An entry of ours that names a Gateway gone
// before (as the operator finds it at its start) is taken out too.
func TestGoneGatewayLeavesItsRoutes(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	class := newClass(t, gateway.ControllerName, nil)
	edge := newGateway(t, ns, class.Name, 80)
	other := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Spec: edge.Spec}
	if err := suite.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	parents := []gwv1.ParentReference{{Name: "edge"}, {Name: "other"}}

	web := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: parents}}}
	if err := suite.Client.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	web.Status.Parents = []gwv1.RouteParentStatus{
		parentStatus(ns, "edge", gateway.ControllerName), parentStatus(ns, "other", gateway.ControllerName), parentStatus(ns, "edge", otherController)}
	if err := suite.Client.Status().Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	rpc := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rpc"},
		Spec: gwv1.GRPCRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: parents[:1]}}}
	if err := suite.Client.Create(ctx, rpc); err != nil {
		t.Fatal(err)
	}
	rpc.Status.Parents = []gwv1.RouteParentStatus{parentStatus(ns, "edge", gateway.ControllerName)}
	if err := suite.Client.Status().Update(ctx, rpc); err != nil {
		t.Fatal(err)
	}
	// While both Gateways are there, the entries stay as written.
	suite.Touch(t, ControllerName, edge)
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
		t.Fatal(err)
	}
	if len(web.Status.Parents) != 3 {
		t.Fatalf("with its Gateways there, the route's entries changed: %v", entries(web.Status.Parents))
	}

	if err := suite.Client.Delete(ctx, edge); err != nil {
		t.Fatal(err)
	}
	want := []string{string(otherController) + " " + ns + "/edge", string(gateway.ControllerName) + " " + ns + "/other"}
	testenv.WaitFor(t, suite.Client, ns, "web", &gwv1.HTTPRoute{}, func(rt *gwv1.HTTPRoute) bool {
		return slices.Equal(entries(rt.Status.Parents), want)
	})
	testenv.WaitFor(t, suite.Client, ns, "rpc", &gwv1.GRPCRoute{}, func(rt *gwv1.GRPCRoute) bool {
		return len(rt.Status.Parents) == 0
	})

	// An entry of ours for a Gateway that was gone before.
	late := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gone"}}}}}
	if err := suite.Client.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	late.Status.Parents = []gwv1.RouteParentStatus{parentStatus(ns, "gone", gateway.ControllerName), parentStatus(ns, "gone", otherController)}
	if err := suite.Client.Status().Update(ctx, late); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "late", &gwv1.HTTPRoute{}, func(rt *gwv1.HTTPRoute) bool {
		return slices.Equal(entries(rt.Status.Parents), []string{string(otherController) + " " + ns + "/gone"})
	})
}
