package gateway

import gwv1 "sigs.k8s.io/gateway-api/apis/v1"

// FleetName is the name of the Envoy that serves the Gateway named
// gatewayName, in the Gateway's namespace: the Gateway's own name, so that
// its fleet's Deployment and Service are found by it.
func FleetName(gatewayName string) string { return gatewayName }

// SupportedFeatures are the Gateway API features a Gateway of this
// operator's serves, as its GatewayClass's status says and the conformance
// suite tests: each one named here passes the suite's tests of it. The
// Gateway API asks for them sorted by name.
var SupportedFeatures = []gwv1.FeatureName{
	"GRPCRoute",
	"Gateway",
	"GatewayPort8080",
	"HTTPRoute",
	"HTTPRoute303RedirectStatusCode",
	"HTTPRoute307RedirectStatusCode",
	"HTTPRoute308RedirectStatusCode",
	"HTTPRouteBackendRequestHeaderModification",
	"HTTPRouteBackendTimeout",
	"HTTPRouteDestinationPortMatching",
	"HTTPRouteHostRewrite",
	"HTTPRouteMethodMatching",
	"HTTPRouteParentRefPort",
	"HTTPRoutePathRedirect",
	"HTTPRoutePathRewrite",
	"HTTPRoutePortRedirect",
	"HTTPRouteQueryParamMatching",
	"HTTPRouteRequestTimeout",
	"HTTPRouteResponseHeaderModification",
	"HTTPRouteSchemeRedirect",
	"ReferenceGrant",
}
