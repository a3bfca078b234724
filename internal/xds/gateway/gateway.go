// Package gateway is the stage before translate for fleets that serve a
// Kubernetes Gateway API Gateway, and pure: a Gateway, the routes that
// attach to it and what they reference in, one translate.Config out, with
// the status the Gateway API asks for of the Gateway and of each route.
//
// Its invariant: a Gateway's content reaches the fleet's proxies through the
// same pipeline as an EnvoyConfig's, as a translate.Config that no tenant
// can write. Everything translate and publish guarantee of an EnvoyConfig
// (the content policy, a real Envoy as the judge, recorded revisions,
// per-proxy answers, withholding, rollouts in steps) holds for it. What is
// wrong in meaning is never refused here: it is reported in the status the
// Gateway API names, and left out of what is served (a rule whose backends
// are all invalid answers 500, a listener with a conflict gets no routes).
//
// A reference across namespaces (a route's backend, a listener's
// certificate) is followed only when a ReferenceGrant in the referenced
// namespace allows it: so a route reaches no Service its author could not
// name, and a Gateway serves no Secret its namespace was not given.
package gateway

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// ControllerName is the GatewayClass controllerName this operator serves.
const ControllerName gwv1.GatewayController = "kube-envoy-controller.io/gateway-controller"

// ConfigSeparator marks the name of a Gateway's translate.Config: it is
// "<namespace>/gateway:<name>", which no EnvoyConfig can be named, since ':'
// is not allowed in an object's name. By it translate knows a Gateway's
// Config, whose resources win every conflict with an EnvoyConfig of the
// fleet (translate.IsGatewayConfig).
const ConfigSeparator = translate.GatewayConfigMark

// ConfigName is the name of the translate.Config of the Gateway ns/name.
func ConfigName(ns, name string) string { return ns + "/" + ConfigSeparator + name }

// ContainerPort is the port a fleet's Envoy listens on for a Gateway
// listener's port: a port below 1024 is moved up by 10000, so that the
// proxies run without the privilege to bind it (80 → 10080). The fleet's
// Service exposes the listener's own port.
func ContainerPort(port int32) int32 {
	if port < 1024 {
		return port + 10000
	}
	return port
}

// Input is everything one Gateway's translation reads.
type Input struct {
	// Class is the Gateway's GatewayClass, whose controllerName is
	// ControllerName.
	Class gwv1.GatewayClass
	// Gateway is the Gateway translated.
	Gateway gwv1.Gateway
	// FleetName is the name of the Envoy, in the Gateway's namespace, whose
	// proxies serve it: the Config's envoyRef.
	FleetName string
	// HTTPRoutes are the HTTPRoutes of every namespace whose parentRefs may
	// name this Gateway; those that do not are ignored.
	HTTPRoutes []gwv1.HTTPRoute
	// GRPCRoutes likewise.
	GRPCRoutes []gwv1.GRPCRoute
	// Namespaces holds every namespace's labels, by name, for the
	// listeners' allowedRoutes selectors.
	Namespaces map[string]map[string]string
	// Services holds the Services that routes name as backends, by
	// namespace/name; a name missing here does not exist.
	Services map[types.NamespacedName]corev1.Service
	// Secrets holds the Secrets that listeners name as certificates, by
	// namespace/name; a name missing here does not exist.
	Secrets map[types.NamespacedName]corev1.Secret
	// Grants are the ReferenceGrants of every namespace.
	Grants []gwv1beta1.ReferenceGrant
	// Refused holds the routes refused alone (Alone): by the content
	// policy's and Envoy's rules, or by a real Envoy. None of their current
	// rules is served, their parents say why (Accepted False), and the
	// Gateway's other routes are served.
	Refused map[RouteKey]Refusal
	// Published is the Gateway's Config as the fleet's published revision
	// holds it, if any: a route refused alone keeps the rules it serves of
	// it there (earlier.go), as an EnvoyConfig whose change is refused
	// keeps its published content, and its parents say which generation
	// is served.
	Published *translate.Config
}

// Refusal is why a route is refused: the reason of its Accepted condition
// and the message.
type Refusal struct {
	Reason, Message string
}

// ReasonRefusedByEnvoy is the reason of a route's Accepted condition when a
// real Envoy refused to load it.
const ReasonRefusedByEnvoy = "RefusedByEnvoy"

// RouteKey names a route of any kind.
type RouteKey struct {
	Kind gwv1.Kind
	types.NamespacedName
}

func (k RouteKey) String() string { return string(k.Kind) + " " + k.NamespacedName.String() }

// Routes are the keys of the routes of in that name its Gateway, in order.
func (in Input) Routes() []RouteKey {
	t := &translation{in: in, gw: types.NamespacedName{Namespace: in.Gateway.Namespace, Name: in.Gateway.Name}}
	var out []RouteKey
	for _, r := range in.HTTPRoutes {
		if slices.ContainsFunc(r.Spec.ParentRefs, func(p gwv1.ParentReference) bool { return t.names(p, r.Namespace) }) {
			out = append(out, RouteKey{Kind: "HTTPRoute", NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: r.Name}})
		}
	}
	for _, r := range in.GRPCRoutes {
		if slices.ContainsFunc(r.Spec.ParentRefs, func(p gwv1.ParentReference) bool { return t.names(p, r.Namespace) }) {
			out = append(out, RouteKey{Kind: "GRPCRoute", NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: r.Name}})
		}
	}
	return out
}

// Alone is in with the route k as the Gateway's only route: its
// translation's Config is what the route alone adds to the Gateway's
// listeners, which a real Envoy can load to judge the route by itself.
func (in Input) Alone(k RouteKey) Input {
	out := in
	out.HTTPRoutes, out.GRPCRoutes, out.Refused, out.Published = nil, nil, nil, nil
	for _, r := range in.HTTPRoutes {
		if k.Kind == "HTTPRoute" && r.Namespace == k.Namespace && r.Name == k.Name {
			out.HTTPRoutes = append(out.HTTPRoutes, r)
		}
	}
	for _, r := range in.GRPCRoutes {
		if k.Kind == "GRPCRoute" && r.Namespace == k.Namespace && r.Name == k.Name {
			out.GRPCRoutes = append(out.GRPCRoutes, r)
		}
	}
	return out
}

// Output is one Gateway's translation.
type Output struct {
	// Config is what the fleet serves of the Gateway: named
	// ConfigName(ns, gateway), targeting FleetName, created when the
	// Gateway was. Its serviceEndpoints and tlsSecrets name a Service or
	// Secret of another namespace as "namespace/name" (only there, and
	// only when a ReferenceGrant allows it); of the Gateway's namespace,
	// by name alone: translate.Input's Slices and Secrets are to be keyed
	// so. The names of its resources are in names.go; each Envoy route
	// says where it comes from in its name and its MetadataKey metadata.
	Config translate.Config
	// Gateway is the Gateway's status as translation sees it: its
	// Accepted condition and each listener's status (supported kinds,
	// attached routes, Accepted, ResolvedRefs, Conflicted). Programmed,
	// of the Gateway and of its listeners, is left to the caller, who
	// knows whether the fleet's proxies acknowledged the Config;
	// ListenerValid says which listeners could be. No condition has a
	// lastTransitionTime: the caller, who knows the time and the
	// condition before, sets it (as meta.SetStatusCondition does).
	Gateway gwv1.GatewayStatus
	// ListenerValid holds, by listener name, whether the listener is
	// served (no conflict, its references resolved).
	ListenerValid map[gwv1.SectionName]bool
	// HTTPRoutes holds, for each HTTPRoute that names this Gateway, its
	// parent statuses for this Gateway (one per parentRef that names it),
	// with ControllerName, Accepted and ResolvedRefs set.
	HTTPRoutes map[types.NamespacedName][]gwv1.RouteParentStatus
	// GRPCRoutes likewise.
	GRPCRoutes map[types.NamespacedName][]gwv1.RouteParentStatus
}
