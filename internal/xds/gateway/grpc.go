package gateway

import (
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// grpcRoutes attaches and translates the GRPCRoutes, as HTTPRoutes are:
// a gRPC method is a request path, /<service>/<method>, and its backends
// are reached over HTTP/2.
func (t *translation) grpcRoutes(ls []*listener) map[types.NamespacedName][]gwv1.RouteParentStatus {
	out := map[types.NamespacedName][]gwv1.RouteParentStatus{}
	for _, gr := range t.in.GRPCRoutes {
		r := routeObject{kind: "GRPCRoute", meta: gr.ObjectMeta, parents: gr.Spec.ParentRefs, hostnames: gr.Spec.Hostnames}
		t.route(ls, r, out, len(gr.Spec.Rules), func(ri int) ([]entry, *problem, *problem) { return t.grpcRule(r, gr.Spec.Rules[ri], ri) })
	}
	return out
}

// grpcRule translates one rule of a GRPCRoute: an Envoy route for each of
// its matches, and its problems as httpRule's.
func (t *translation) grpcRule(r routeObject, rule gwv1.GRPCRouteRule, ri int) ([]entry, *problem, *problem) {
	refs := make([]gwv1.BackendRef, 0, len(rule.BackendRefs))
	filters := make([][]gwv1.HTTPRouteFilter, 0, len(rule.BackendRefs))
	for _, b := range rule.BackendRefs {
		refs, filters = append(refs, b.BackendRef), append(filters, httpFilters(b.Filters))
	}
	shares, resolved := t.shares(r, refs, filters, true)
	asHTTP := gwv1.HTTPRouteRule{Filters: httpFilters(rule.Filters)}
	mirrors, p := t.mirrors(r, asHTTP.Filters)
	if resolved == nil {
		resolved = p
	}
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gwv1.GRPCRouteMatch{{}}
	}
	unsupported := cmpOr(unsupportedFilter(asHTTP.Filters), unmodifiableHeader(asHTTP.Filters, filters))
	out := make([]entry, 0, len(matches))
	for mi, m := range matches {
		match, order := grpcMatch(m)
		if p := badRegex(match); p != nil {
			unsupported = cmpOr(unsupported, p)
			continue
		}
		e := newEntry(r, ri, mi, match, order)
		t.httpAction(&e, asHTTP, gwv1.HTTPRouteMatch{}, shares, mirrors)
		out = append(out, e)
	}
	return out, resolved, unsupported
}

// httpFilters are gRPC filters as the HTTP filters of the same type.
func httpFilters(fs []gwv1.GRPCRouteFilter) []gwv1.HTTPRouteFilter {
	out := make([]gwv1.HTTPRouteFilter, 0, len(fs))
	for _, f := range fs {
		out = append(out, gwv1.HTTPRouteFilter{
			Type:                   gwv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier:  f.RequestHeaderModifier,
			ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror:          f.RequestMirror,
			ExtensionRef:           f.ExtensionRef,
		})
	}
	return out
}

// grpcMatch is a GRPCRouteMatch as Envoy matches its request's path and
// headers: an exact service and method are an exact path, a service
// alone a prefix, anything else a regular expression.
func grpcMatch(m gwv1.GRPCRouteMatch) (*routev3.RouteMatch, precedence) {
	out := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	order := precedence{pathRank: rankPrefix, pathLen: 1}
	if mm := m.Method; mm != nil {
		regex := mm.Type != nil && *mm.Type == gwv1.GRPCMethodMatchRegularExpression
		service, method := deref(mm.Service), deref(mm.Method)
		switch {
		case !regex && service != "" && method != "":
			path := "/" + service + "/" + method
			out.PathSpecifier, order = &routev3.RouteMatch_Path{Path: path}, precedence{pathRank: rankExact, pathLen: len(path)}
		case !regex && service != "":
			prefix := "/" + service + "/"
			out.PathSpecifier, order = &routev3.RouteMatch_Prefix{Prefix: prefix}, precedence{pathRank: rankPrefix, pathLen: len(prefix)}
		case service != "" || method != "":
			re := "/" + grpcPart(service, regex) + "/" + grpcPart(method, regex)
			out.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}
			order = precedence{pathRank: rankRegex, pathLen: len(service) + len(method)}
		}
	}
	seen := map[string]bool{}
	for _, h := range m.Headers {
		name := strings.ToLower(string(h.Name))
		if seen[name] {
			continue
		}
		seen[name] = true
		out.Headers = append(out.Headers, headerMatch(name, h.Type != nil && *h.Type == gwv1.GRPCHeaderMatchRegularExpression, h.Value))
		order.headers++
	}
	return out, order
}

// grpcPart is a service or method in a path's regular expression: any
// when empty.
func grpcPart(s string, regex bool) string {
	switch {
	case s == "":
		return "[^/]+"
	case regex:
		return s
	}
	return regexp.QuoteMeta(s)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
