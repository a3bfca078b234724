package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

func TestParseTarget(t *testing.T) {
	for _, c := range []struct {
		arg     string
		want    statusTarget
		wantErr string
	}{
		{arg: "edge", want: statusTarget{kindEnvoy, "edge"}},
		{arg: "envoy/edge", want: statusTarget{kindEnvoy, "edge"}},
		{arg: "envoys.example.com/edge", want: statusTarget{kindEnvoy, "edge"}},
		{arg: "gateway/edge", want: statusTarget{kindGateway, "edge"}},
		{arg: "Gateways/edge", want: statusTarget{kindGateway, "edge"}},
		{arg: "gtw/edge", want: statusTarget{kindGateway, "edge"}},
		{arg: "gateway.gateway.networking.k8s.io/edge", want: statusTarget{kindGateway, "edge"}},
		{arg: "httproute/web", want: statusTarget{kindHTTPRoute, "web"}},
		{arg: "httproutes.gateway.networking.k8s.io/web", want: statusTarget{kindHTTPRoute, "web"}},
		{arg: "grpcroute/api", want: statusTarget{kindGRPCRoute, "api"}},
		{arg: "gateway.example.com/edge", wantErr: "the kind is one of"},
		{arg: "tlsroute/x", wantErr: "the kind is one of"},
		{arg: "gateway/", wantErr: "want NAME or KIND/NAME"},
		{arg: "gateway/a/b", wantErr: "want NAME or KIND/NAME"},
	} {
		got, err := parseTarget(c.arg)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%q: error %v, want %q", c.arg, err, c.wantErr)
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("%q: %+v, %v, want %+v", c.arg, got, err, c.want)
		}
	}
}

// parent is a route's status entry for the Gateway ns/name, by controller.
func parent(controller gwv1.GatewayController, ns *string, name, section string, accepted *metav1.Condition) gwv1.RouteParentStatus {
	p := gwv1.RouteParentStatus{ControllerName: controller, ParentRef: gwv1.ParentReference{Name: gwv1.ObjectName(name)}}
	if ns != nil {
		p.ParentRef.Namespace = ptr.To(gwv1.Namespace(*ns))
	}
	if section != "" {
		p.ParentRef.SectionName = ptr.To(gwv1.SectionName(section))
	}
	if accepted != nil {
		p.Conditions = []metav1.Condition{{Type: "ResolvedRefs", Status: metav1.ConditionTrue}, *accepted}
	}
	return p
}

// A route's Gateways are those of the entries this operator wrote in its
// status.parents, each with its Accepted condition; other controllers'
// entries and parents that are not Gateways are not ours.
func TestRouteAttachments(t *testing.T) {
	route := types.NamespacedName{Namespace: "team", Name: "web"}
	accepted := &metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}
	refused := &metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NotAllowedByListeners", Message: "no listener allows routes of namespace team"}
	notGateway := parent(gateway.ControllerName, nil, "svc", "", accepted)
	notGateway.ParentRef.Kind = ptr.To(gwv1.Kind("Service"))
	notGateway.ParentRef.Group = ptr.To(gwv1.Group(""))
	for _, c := range []struct {
		name    string
		parents []gwv1.RouteParentStatus
		want    []attachment
	}{
		{name: "no status", parents: nil, want: nil},
		{name: "ours, in the route's namespace and another",
			parents: []gwv1.RouteParentStatus{
				parent(gateway.ControllerName, nil, "edge", "http", accepted),
				parent(gateway.ControllerName, ptr.To("infra"), "shared", "", refused),
			},
			want: []attachment{
				{Route: "HTTPRoute team/web", Gateway: "team/edge", SectionName: "http", Accepted: "True", Reason: "Accepted"},
				{Route: "HTTPRoute team/web", Gateway: "infra/shared", Accepted: "False", Reason: "NotAllowedByListeners", Message: "no listener allows routes of namespace team"},
			}},
		{name: "another controller's entry and a parent that is not a Gateway are left out",
			parents: []gwv1.RouteParentStatus{
				parent("example.com/other", nil, "edge", "", accepted),
				notGateway,
				parent(gateway.ControllerName, nil, "edge", "", nil),
			},
			want: []attachment{{Route: "HTTPRoute team/web", Gateway: "team/edge", Accepted: "Unknown"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := routeAttachments(kindHTTPRoute, route, c.parents); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// A Gateway's fleet is the Envoy named after it in its namespace that it
// controls, and no other.
func TestGatewayFleet(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "edge", UID: "gw-uid"}, Spec: gwv1.GatewaySpec{GatewayClassName: "kec"}}
	envoy := func(owner *metav1.OwnerReference) *examplev1.Envoy {
		e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: gateway.FleetName("edge")}}
		if owner != nil {
			e.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return e
	}
	controlledBy := func(apiVersion, kind string, uid types.UID, controller bool) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "edge", UID: uid, Controller: ptr.To(controller)}
	}
	for _, c := range []struct {
		name        string
		envoy       *examplev1.Envoy
		want        fleet.ID
		wantProblem string
	}{
		{name: "controlled by the Gateway", envoy: envoy(controlledBy(gwv1.GroupVersion.String(), "Gateway", "gw-uid", true)), want: fleet.ID{Namespace: "team", Name: "edge"}},
		{name: "no Envoy", envoy: nil, wantProblem: "no Envoy team/edge: the Gateway's class (kec) is not served by kube-envoy-controller"},
		{name: "an Envoy of its own", envoy: envoy(nil), wantProblem: "the Gateway does not control it"},
		{name: "owned, not controlled", envoy: envoy(controlledBy(gwv1.GroupVersion.String(), "Gateway", "gw-uid", false)), wantProblem: "the Gateway does not control it"},
		{name: "controlled by an earlier Gateway of the name", envoy: envoy(controlledBy(gwv1.GroupVersion.String(), "Gateway", "old-uid", true)), wantProblem: "the Gateway does not control it"},
		{name: "controlled by another kind", envoy: envoy(controlledBy("example.com/v1", "Gateway", "gw-uid", true)), wantProblem: "the Gateway does not control it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, problem := gatewayFleet(gw, c.envoy)
			if got != c.want || (c.wantProblem == "") != (problem == "") || !strings.Contains(problem, c.wantProblem) {
				t.Errorf("%v, %q; want %v, %q", got, problem, c.want, c.wantProblem)
			}
		})
	}
}

func TestAttachedFleetsAndTheirLines(t *testing.T) {
	atts := []attachment{
		{Route: "HTTPRoute team/web", Gateway: "team/edge", SectionName: "http", Accepted: "True", Reason: "Accepted", Fleet: "team/edge"},
		{Route: "HTTPRoute team/web", Gateway: "team/edge", SectionName: "https", Accepted: "True", Reason: "Accepted", Fleet: "team/edge"},
		{Route: "HTTPRoute team/web", Gateway: "infra/shared", Accepted: "False", Reason: "NotAllowedByListeners", Message: "no listener\nallows it", Fleet: "infra/shared"},
		{Route: "HTTPRoute team/web", Gateway: "infra/gone", Accepted: "Unknown", Problem: `gateways.gateway.networking.k8s.io "gone" not found`},
	}
	if got, want := attachedFleets(atts), []fleet.ID{{Namespace: "team", Name: "edge"}, {Namespace: "infra", Name: "shared"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("fleets %v, want %v", got, want)
	}
	var b bytes.Buffer
	printAttachments(&b, "HTTPRoute team/web", atts)
	want := `HTTPRoute team/web: Gateway team/edge (listener http), Accepted, fleet team/edge
HTTPRoute team/web: Gateway team/edge (listener https), Accepted, fleet team/edge
HTTPRoute team/web: Gateway infra/shared, Accepted False (NotAllowedByListeners: no listener allows it), fleet infra/shared
HTTPRoute team/web: Gateway infra/gone, Accepted Unknown, no fleet: gateways.gateway.networking.k8s.io "gone" not found

`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printAttachments(&b, "HTTPRoute team/web", nil)
	if want := "HTTPRoute team/web is attached to no Gateway of kube-envoy-controller.io/gateway-controller (its status.parents)\n\n"; b.String() != want {
		t.Errorf("no parent: %q, want %q", b.String(), want)
	}
	b.Reset()
	printAttachments(&b, "", []attachment{{Gateway: "team/edge", Fleet: "team/edge"}})
	if want := "Gateway team/edge, fleet team/edge\n\n"; b.String() != want {
		t.Errorf("a Gateway: %q, want %q", b.String(), want)
	}
}
