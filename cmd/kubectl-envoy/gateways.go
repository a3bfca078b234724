package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// This file is proxy-status's functional core for the Gateway API: which
// object the argument names, and which fleets serve a Gateway or a route.

// Kinds of proxy-status's argument.
const (
	kindEnvoy     = "Envoy"
	kindGateway   = "Gateway"
	kindHTTPRoute = "HTTPRoute"
	kindGRPCRoute = "GRPCRoute"
)

// statusTarget is what proxy-status is asked about: a fleet (an Envoy), a
// Gateway or a route, by name in the namespace.
type statusTarget struct {
	kind, name string
}

// targetKinds are the kinds' names as kubectl takes them: singular,
// plural, short, and with the group.
var targetKinds = map[string]string{
	"envoy": kindEnvoy, "envoys": kindEnvoy,
	"gateway": kindGateway, "gateways": kindGateway, "gtw": kindGateway,
	"httproute": kindHTTPRoute, "httproutes": kindHTTPRoute,
	"grpcroute": kindGRPCRoute, "grpcroutes": kindGRPCRoute,
}

// kindGroups are the API groups of the kinds, for a kind given with its group.
var kindGroups = map[string]string{
	kindEnvoy: examplev1.GroupVersion.Group, kindGateway: gwv1.GroupName, kindHTTPRoute: gwv1.GroupName, kindGRPCRoute: gwv1.GroupName,
}

// parseTarget reads proxy-status's argument: NAME, a fleet (an Envoy's
// name), or KIND/NAME, KIND one of envoy, gateway, httproute or grpcroute,
// as kubectl names resources (singular, plural, gtw, or with the group:
// gateway.gateway.networking.k8s.io).
func parseTarget(arg string) (statusTarget, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		return statusTarget{kind: kindEnvoy, name: arg}, nil
	}
	if name == "" || strings.Contains(name, "/") {
		return statusTarget{}, fmt.Errorf("%q: want NAME or KIND/NAME", arg)
	}
	resource, group, _ := strings.Cut(strings.ToLower(kind), ".")
	k, known := targetKinds[resource]
	if !known || group != "" && group != kindGroups[k] {
		return statusTarget{}, fmt.Errorf("%q: the kind is one of envoy, gateway, httproute or grpcroute", arg)
	}
	return statusTarget{kind: k, name: name}, nil
}

// attachment is one fleet that serves what proxy-status is asked about: a
// Gateway's, or for a route, one of its parents' (one per entry of the
// route's status.parents that this operator wrote).
type attachment struct {
	// Route is the route, "HTTPRoute namespace/name", for a route's parents.
	Route string `json:"route,omitempty"`
	// Gateway is the Gateway, namespace/name, and SectionName the listener
	// the parentRef names, if it names one.
	Gateway     string `json:"gateway"`
	SectionName string `json:"sectionName,omitempty"`
	// Accepted is the route's Accepted condition for this parent:
	// "True", "False" or "Unknown", with its reason and message.
	Accepted string `json:"accepted,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	// Fleet is the Gateway's fleet, namespace/name; "" when it has none,
	// and Problem says why.
	Fleet   string `json:"fleet,omitempty"`
	Problem string `json:"problem,omitempty"`
}

// routeAttachments returns the parents of a route, kind namespace/name,
// that this operator recorded in its status.parents: the Gateways it is
// attached to (or was refused by, as the condition says), in order.
func routeAttachments(kind string, route types.NamespacedName, parents []gwv1.RouteParentStatus) []attachment {
	var out []attachment
	for _, p := range parents {
		if p.ControllerName != gateway.ControllerName {
			continue
		}
		ref := p.ParentRef
		if ref.Group != nil && *ref.Group != gwv1.GroupName || ref.Kind != nil && *ref.Kind != kindGateway {
			continue
		}
		ns := route.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		a := attachment{Route: kind + " " + route.String(), Gateway: ns + "/" + string(ref.Name), Accepted: string(metav1.ConditionUnknown)}
		if ref.SectionName != nil {
			a.SectionName = string(*ref.SectionName)
		}
		if c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); c != nil {
			a.Accepted, a.Reason, a.Message = string(c.Status), c.Reason, c.Message
		}
		out = append(out, a)
	}
	return out
}

// gatewayFleet returns the fleet that serves gw: the Envoy of gw's
// namespace named after it (gateway.FleetName) and controlled by it.
// envoy is that Envoy as read, nil when there is none. When gw has no
// fleet, problem says why.
func gatewayFleet(gw *gwv1.Gateway, envoy *examplev1.Envoy) (id fleet.ID, problem string) {
	name := gateway.FleetName(gw.Name)
	if envoy == nil {
		return fleet.ID{}, fmt.Sprintf("no Envoy %s/%s: the Gateway's class (%s) is not served by kube-envoy-controller, or its fleet is not made yet",
			gw.Namespace, name, gw.Spec.GatewayClassName)
	}
	owner := metav1.GetControllerOf(envoy)
	if owner == nil || owner.Kind != kindGateway || owner.APIVersion != gwv1.GroupVersion.String() || owner.UID != gw.UID {
		return fleet.ID{}, fmt.Sprintf("Envoy %s/%s is not the Gateway's fleet: the Gateway does not control it", envoy.Namespace, envoy.Name)
	}
	return fleet.ID{Namespace: envoy.Namespace, Name: envoy.Name}, ""
}

// attachedFleets returns the fleets of atts, each once, in order.
func attachedFleets(atts []attachment) []fleet.ID {
	var out []fleet.ID
	for _, a := range atts {
		if a.Fleet == "" {
			continue
		}
		if id, err := fleet.Parse(a.Fleet); err == nil && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// printAttachments writes, before the table of proxies, which fleets serve
// the Gateway or route asked about: a line each. route is the route, "HTTPRoute namespace/name", when it is one.
func printAttachments(w io.Writer, route string, atts []attachment) {
	if route != "" && len(atts) == 0 {
		fmt.Fprintf(w, "%s is attached to no Gateway of %s (its status.parents)\n\n", route, gateway.ControllerName)
	}
	for _, a := range atts {
		var line strings.Builder
		if a.Route != "" {
			line.WriteString(a.Route + ": ")
		}
		line.WriteString("Gateway " + a.Gateway)
		if a.SectionName != "" {
			line.WriteString(" (listener " + a.SectionName + ")")
		}
		if a.Route != "" {
			switch {
			case a.Accepted == string(metav1.ConditionTrue):
				line.WriteString(", Accepted")
			case a.Reason != "":
				line.WriteString(fmt.Sprintf(", Accepted %s (%s: %s)", a.Accepted, a.Reason, oneLine(a.Message, maxNACKColumn)))
			default:
				line.WriteString(", Accepted " + a.Accepted)
			}
		}
		if a.Fleet != "" {
			line.WriteString(", fleet " + a.Fleet)
		} else {
			line.WriteString(", no fleet: " + a.Problem)
		}
		fmt.Fprintln(w, line.String())
	}
	if len(atts) > 0 {
		fmt.Fprintln(w)
	}
}
