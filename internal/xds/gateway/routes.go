package gateway

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// MetadataKey is the filter_metadata key under which each Envoy route says
// which route, rule and match it comes from: kind, namespace, name,
// generation, rule and match (indexes from 0); and pathLength, the length
// of its path match by which it is ordered, when its Envoy match does not
// tell it. Under the same key, a virtual host says from which hostnames
// its routes come (hostGroupsMetadata).
const MetadataKey = "gateway.networking.k8s.io"

// entry is one Envoy route: one match of one rule of a route.
type entry struct {
	order precedence
	route *routev3.Route
	// clusters are the clusters it sends requests to.
	clusters []string
	// listenerPort is set on a redirect that names neither a scheme nor a
	// port: the Gateway API has it redirect to the listener's port, which
	// each port's route configuration sets (routeConfiguration).
	listenerPort bool
}

// precedence orders the Envoy routes of a virtual host as the Gateway API
// orders its matches: an exact path, then a regular expression (whose
// place the API leaves to the implementation), then the longest prefix;
// then a method; then the most headers; then the most query parameters;
// then the oldest route; then the route first by namespace/name; then
// the rules and matches in their order.
type precedence struct {
	pathRank, pathLen int
	method            bool
	headers, queries  int
	created           metav1.Time
	route             string
	rule, match       int
}

const (
	rankPrefix = iota
	rankRegex
	rankExact
)

func (a precedence) before(b precedence) bool {
	switch {
	case a.pathRank != b.pathRank:
		return a.pathRank > b.pathRank
	case a.pathLen != b.pathLen:
		return a.pathLen > b.pathLen
	case a.method != b.method:
		return a.method
	case a.headers != b.headers:
		return a.headers > b.headers
	case a.queries != b.queries:
		return a.queries > b.queries
	case !a.created.Equal(&b.created):
		return a.created.Before(&b.created)
	case a.route != b.route:
		return a.route < b.route
	case a.rule != b.rule:
		return a.rule < b.rule
	}
	return a.match < b.match
}

func sortEntries(es []entry) {
	sort.SliceStable(es, func(i, j int) bool { return es[i].order.before(es[j].order) })
}

// placed is an Envoy route in a virtual host, and the listener it came
// through.
type placed struct {
	entry
	listener *listener
}

// place puts a route's entries in the virtual hosts of the valid
// listeners it attached to.
func (t *translation) place(atts []attachment, es []entry) {
	for _, a := range atts {
		if !a.listener.valid() {
			continue
		}
		hosts := t.ports[a.listener.spec.Port]
		for _, h := range a.hosts {
			for _, e := range es {
				hosts[h] = append(hosts[h], placed{entry: e, listener: a.listener})
			}
		}
	}
}

// owner is the listener of a port that requests for host h reach: the one
// whose hostname matches h most narrowly (h itself, then the longest
// wildcard, then none).
func owner(ls []*listener, port gwv1.PortNumber, h string) *listener {
	var best *listener
	bestRank := -1
	for _, l := range ls {
		if !l.valid() || l.spec.Port != port {
			continue
		}
		rank := -1
		switch {
		case l.spec.Hostname == nil || *l.spec.Hostname == "":
			rank = 0
		case string(*l.spec.Hostname) == h:
			rank = 1 << 20
		case wildcard(string(*l.spec.Hostname)) && covers(string(*l.spec.Hostname), h):
			rank = len(*l.spec.Hostname)
		}
		if rank > bestRank {
			best, bestRank = l, rank
		}
	}
	return best
}

// hostRoutes are the Envoy routes of virtual host h of a port: those of
// the routes whose hostname is h, then of those whose wildcard covers h,
// the longest first, then of those of any host, each in order of
// precedence, as the Gateway API orders routes by their hostnames
// first. Only routes attached to h's owner are served there: a request
// reaches one listener of a port, the one of its host.
//
// groups says how many of them come from each of those hosts, in order:
// the virtual host's metadata keeps it (hostGroups), so that a route's
// rules read back from a published Config are placed as they were
// (earlier.go).
func hostRoutes(byHost map[string][]placed, owner *listener, h string) (out []entry, groups []hostGroup) {
	var hosts []string
	for _, g := range coveringHosts(h) {
		if _, ok := byHost[g]; ok {
			hosts = append(hosts, g)
		}
	}
	hostOrder(hosts)
	seen := map[string]bool{}
	for _, g := range hosts {
		var es []entry
		for _, p := range byHost[g] {
			if p.listener == owner && !seen[p.route.Name] {
				seen[p.route.Name] = true
				es = append(es, p.entry)
			}
		}
		sortEntries(es)
		out = append(out, es...)
		if len(es) > 0 {
			groups = append(groups, hostGroup{host: g, routes: len(es)})
		}
	}
	return out, groups
}

// hostGroup is a run of a virtual host's Envoy routes that come from the
// routes of one hostname (h itself, a wildcard that covers it, or any).
type hostGroup struct {
	host   string
	routes int
}

// coveringHosts are the virtual hosts whose routes a request for h may
// take: h itself, anyHost, and every wildcard that covers h, each a
// suffix of h from one of its dots. Looking these up, rather than testing
// every virtual host of the port, keeps a port of many hostnames linear.
func coveringHosts(h string) []string {
	out := []string{h}
	if h != anyHost {
		out = append(out, anyHost)
	}
	for i := 1; i < len(h); i++ {
		if h[i] == '.' {
			if w := "*" + h[i:]; covers(w, h) {
				out = append(out, w)
			}
		}
	}
	return out
}

// newEntry starts the Envoy route of match mi of rule ri of r.
func newEntry(r routeObject, ri, mi int, m *routev3.RouteMatch, order precedence) entry {
	order.created, order.route, order.rule, order.match = r.meta.CreationTimestamp, r.meta.Namespace+"/"+r.meta.Name, ri, mi
	fields := map[string]any{
		"kind": string(r.kind), "namespace": r.meta.Namespace, "name": r.meta.Name,
		"generation": float64(r.meta.Generation), "rule": float64(ri), "match": float64(mi),
	}
	if order.pathLen != matchPathLen(m) {
		// What the match does not tell of its precedence (orderOf).
		fields["pathLength"] = float64(order.pathLen)
	}
	md, _ := structpb.NewStruct(fields)
	return entry{order: order, route: &routev3.Route{
		Name:     fmt.Sprintf("%s/%s/%s/rule/%d/match/%d", r.kind, r.meta.Namespace, r.meta.Name, ri, mi),
		Match:    m,
		Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{MetadataKey: md}},
	}}
}

// httpRoutes attaches and translates the HTTPRoutes, and returns their
// parent statuses.
func (t *translation) httpRoutes(ls []*listener) map[types.NamespacedName][]gwv1.RouteParentStatus {
	out := map[types.NamespacedName][]gwv1.RouteParentStatus{}
	for _, hr := range t.in.HTTPRoutes {
		r := routeObject{kind: "HTTPRoute", meta: hr.ObjectMeta, parents: hr.Spec.ParentRefs, hostnames: hr.Spec.Hostnames}
		t.route(ls, r, out, len(hr.Spec.Rules), func(ri int) ([]entry, *problem, *problem) { return t.httpRule(r, hr.Spec.Rules[ri], ri) })
	}
	return out
}

// route attaches the route r and translates its n rules (rule gives one's
// entries and problems), and adds its parent statuses to out: what
// HTTPRoutes and GRPCRoutes share.
func (t *translation) route(ls []*listener, r routeObject, out map[types.NamespacedName][]gwv1.RouteParentStatus, n int, rule func(ri int) ([]entry, *problem, *problem)) {
	refs, accepted, atts := t.attach(r, ls)
	if len(refs) == 0 {
		return
	}
	var resolved, unsupported *problem
	var es []entry
	for ri := range n {
		rs, p, u := rule(ri)
		es = append(es, rs...)
		resolved, unsupported = cmpOr(resolved, p), cmpOr(unsupported, u)
	}
	if why, refused := t.in.Refused[RouteKey{Kind: r.kind, NamespacedName: r.name()}]; refused {
		// Refused alone: none of its current rules is served, its earlier
		// ones are if it has any, and the Gateway's other routes go on.
		es, unsupported = nil, problemf(why.Reason, "%s", why.Message)
		if gen, kept := t.keepEarlier(r, ls); kept {
			unsupported.message += fmt.Sprintf(KeptSuffix+" %d until this is fixed", gen)
		}
	}
	t.place(atts, es)
	notAccepted(accepted, unsupported)
	out[r.name()] = t.parentStatuses(r, refs, accepted, resolved)
}

// notAccepted gives p, when set, to the parents that accepted a route.
func notAccepted(accepted []*problem, p *problem) {
	for i := range accepted {
		if accepted[i] == nil {
			accepted[i] = p
		}
	}
}

// cmpOr is the first problem that is set.
func cmpOr(ps ...*problem) *problem {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

// httpRule translates one rule of an HTTPRoute: an Envoy route for each of
// its matches. The problems are the first of its references that does
// not resolve, and the first of what it asks that is not supported: a
// filter, or a regular expression that does not compile (its match is
// left out: Envoy would refuse the Gateway's whole Config for it).
func (t *translation) httpRule(r routeObject, rule gwv1.HTTPRouteRule, ri int) ([]entry, *problem, *problem) {
	refs := make([]gwv1.BackendRef, 0, len(rule.BackendRefs))
	filters := make([][]gwv1.HTTPRouteFilter, 0, len(rule.BackendRefs))
	for _, b := range rule.BackendRefs {
		refs, filters = append(refs, b.BackendRef), append(filters, b.Filters)
	}
	shares, resolved := t.shares(r, refs, filters, false)
	mirrors, p := t.mirrors(r, rule.Filters)
	if resolved == nil {
		resolved = p
	}
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gwv1.HTTPRouteMatch{{}}
	}
	unsupported := cmpOr(unsupportedFilter(rule.Filters), badPaths(rule.Filters), unmodifiableHeader(rule.Filters, filters))
	out := make([]entry, 0, len(matches))
	for mi, m := range matches {
		match, order := httpMatch(m)
		if p := badRegex(match); p != nil {
			unsupported = cmpOr(unsupported, p)
			continue
		}
		e := newEntry(r, ri, mi, match, order)
		t.httpAction(&e, rule, m, shares, mirrors)
		out = append(out, e)
	}
	return out, resolved, unsupported
}

// badRegex is the problem of a path prefix of m that Envoy refuses, or
// of the first regular expression of m that does not compile. Go's regexp reads RE2's syntax, which Envoy's safe_regex
// is.
func badRegex(m *routev3.RouteMatch) *problem {
	if p := m.GetPathSeparatedPrefix(); strings.ContainsAny(p, "?#") {
		return problemf(string(gwv1.RouteReasonUnsupportedValue), "path prefix %q holds '?' or '#'; its match is left out", p)
	}
	regexes := []string{m.GetSafeRegex().GetRegex()}
	for _, h := range m.Headers {
		regexes = append(regexes, h.GetStringMatch().GetSafeRegex().GetRegex())
	}
	for _, q := range m.QueryParameters {
		regexes = append(regexes, q.GetStringMatch().GetSafeRegex().GetRegex())
	}
	for _, re := range regexes {
		if _, err := regexp.Compile(re); err != nil {
			return problemf(string(gwv1.RouteReasonUnsupportedValue), "regular expression %q does not compile: %v; its match is left out", re, err)
		}
	}
	return nil
}

// httpMatch is an HTTPRouteMatch as Envoy matches it, and its precedence.
func httpMatch(m gwv1.HTTPRouteMatch) (*routev3.RouteMatch, precedence) {
	out := &routev3.RouteMatch{}
	var order precedence
	pathType, value := gwv1.PathMatchPathPrefix, "/"
	if m.Path != nil {
		if m.Path.Type != nil {
			pathType = *m.Path.Type
		}
		if m.Path.Value != nil {
			value = *m.Path.Value
		}
	}
	switch pathType {
	case gwv1.PathMatchExact:
		out.PathSpecifier = &routev3.RouteMatch_Path{Path: value}
		order.pathRank = rankExact
	case gwv1.PathMatchRegularExpression:
		out.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: value}}
		order.pathRank = rankRegex
	default:
		if p := trimPrefix(value); p == "" {
			out.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
		} else {
			out.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: p}
		}
		order.pathRank = rankPrefix
	}
	order.pathLen = len(value)
	if m.Method != nil {
		out.Headers = append(out.Headers, headerMatch(":method", false, string(*m.Method)))
		order.method = true
	}
	seen := map[string]bool{}
	for _, h := range m.Headers {
		name := strings.ToLower(string(h.Name))
		if seen[name] {
			continue // the first of a name counts, as the API says
		}
		seen[name] = true
		out.Headers = append(out.Headers, headerMatch(name, h.Type != nil && *h.Type == gwv1.HeaderMatchRegularExpression, h.Value))
		order.headers++
	}
	seenQuery := map[string]bool{}
	for _, q := range m.QueryParams {
		if seenQuery[string(q.Name)] {
			continue
		}
		seenQuery[string(q.Name)] = true
		out.QueryParameters = append(out.QueryParameters, &routev3.QueryParameterMatcher{
			Name:                         string(q.Name),
			QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: stringMatch(q.Type != nil && *q.Type == gwv1.QueryParamMatchRegularExpression, q.Value)},
		})
		order.queries++
	}
	return out, order
}

// trimPrefix is a path prefix without its trailing slashes, which a
// PathPrefix match ignores: "" for "/".
func trimPrefix(p string) string { return strings.TrimRight(p, "/") }

func headerMatch(name string, regex bool, value string) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: stringMatch(regex, value)}}
}

func stringMatch(regex bool, value string) *matcherv3.StringMatcher {
	if regex {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: value}}}
	}
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: value}}
}

// httpAction sets what an Envoy route does: its rule's filters, and a
// redirect, or its backends (500 when none resolves).
func (t *translation) httpAction(e *entry, rule gwv1.HTTPRouteRule, m gwv1.HTTPRouteMatch, shares []share, mirrors []*routev3.RouteAction_RequestMirrorPolicy) {
	var redirect *gwv1.HTTPRequestRedirectFilter
	var rewrite *gwv1.HTTPURLRewriteFilter
	unsupported := unsupportedFilter(rule.Filters) != nil || badPaths(rule.Filters) != nil
	for _, f := range rule.Filters {
		switch f.Type {
		case gwv1.HTTPRouteFilterRequestHeaderModifier:
			e.route.RequestHeadersToAdd, e.route.RequestHeadersToRemove = headerChanges(f.RequestHeaderModifier)
		case gwv1.HTTPRouteFilterResponseHeaderModifier:
			e.route.ResponseHeadersToAdd, e.route.ResponseHeadersToRemove = headerChanges(f.ResponseHeaderModifier)
		case gwv1.HTTPRouteFilterRequestRedirect:
			redirect = f.RequestRedirect
		case gwv1.HTTPRouteFilterURLRewrite:
			rewrite = f.URLRewrite
		}
	}
	switch {
	case unsupported:
		e.route.Action = internalError()
	case redirect != nil:
		e.route.Action = &routev3.Route_Redirect{Redirect: redirectAction(redirect, m)}
		e.listenerPort = redirect.Port == nil && redirect.Scheme == nil
	default:
		ra, clusters := t.routeAction(shares)
		if ra == nil {
			e.route.Action = internalError()
			return
		}
		rewriteAction(ra, rewrite, m)
		timeouts(ra, rule.Timeouts)
		ra.RequestMirrorPolicies = mirrors
		for _, mp := range mirrors {
			clusters = append(clusters, mp.Cluster)
		}
		e.route.Action, e.clusters = &routev3.Route_Route{Route: ra}, clusters
	}
}

// supportedFilters are the filters of a rule that are translated.
var supportedFilters = map[gwv1.HTTPRouteFilterType]bool{
	gwv1.HTTPRouteFilterRequestHeaderModifier:  true,
	gwv1.HTTPRouteFilterResponseHeaderModifier: true,
	gwv1.HTTPRouteFilterRequestRedirect:        true,
	gwv1.HTTPRouteFilterURLRewrite:             true,
	gwv1.HTTPRouteFilterRequestMirror:          true,
}

// unsupportedFilter is the problem of a rule's first filter that is not
// translated (an ExtensionRef, which names no filter this controller has,
// among them): the rule answers 500, since a filter may not be skipped,
// and the route is not Accepted, with reason UnsupportedValue.
func unsupportedFilter(fs []gwv1.HTTPRouteFilter) *problem {
	for _, f := range fs {
		if !supportedFilters[f.Type] {
			return problemf(string(gwv1.RouteReasonUnsupportedValue), "filter type %q is not supported: its rule answers 500", f.Type)
		}
	}
	return nil
}

// internalError answers 500: the Gateway API's answer for a rule whose
// backends are all invalid.
func internalError() *routev3.Route_DirectResponse {
	return &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 500}}
}

// routeAction sends requests to the shares' clusters by their weights:
// nil when no share with a weight resolves. The share of backends that do
// not resolve goes to invalidClusterName.
func (t *translation) routeAction(shares []share) (*routev3.RouteAction, []string) {
	var weighted []*routev3.WeightedCluster_ClusterWeight
	var clusters []string
	validWeight, withFilters := uint32(0), false
	for _, s := range shares {
		if s.weight == 0 {
			continue
		}
		name := s.cluster
		if s.invalid != nil {
			name = t.invalidClusterName()
		} else {
			validWeight += s.weight
		}
		cw := &routev3.WeightedCluster_ClusterWeight{Name: name, Weight: wrapperspb.UInt32(s.weight)}
		for _, f := range s.filters {
			switch f.Type {
			case gwv1.HTTPRouteFilterRequestHeaderModifier:
				cw.RequestHeadersToAdd, cw.RequestHeadersToRemove = headerChanges(f.RequestHeaderModifier)
				withFilters = true
			case gwv1.HTTPRouteFilterResponseHeaderModifier:
				cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove = headerChanges(f.ResponseHeaderModifier)
				withFilters = true
			}
		}
		weighted = append(weighted, cw)
		clusters = append(clusters, name)
	}
	if validWeight == 0 {
		return nil, nil
	}
	if len(weighted) == 1 && !withFilters {
		return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: weighted[0].Name}}, clusters
	}
	return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: weighted}}}, clusters
}

// headerChanges are a header filter's headers to set, add and remove.
// Envoy reads '%' in a value to add as the start of a command: each is
// doubled, so that the value is sent as it is written.
func headerChanges(f *gwv1.HTTPHeaderFilter) ([]*corev3.HeaderValueOption, []string) {
	if f == nil {
		return nil, nil
	}
	var add []*corev3.HeaderValueOption
	var remove []string
	option := func(h gwv1.HTTPHeader, action corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: strings.ToLower(string(h.Name)), Value: strings.ReplaceAll(h.Value, "%", "%%")},
			AppendAction: action,
		}
	}
	for _, h := range f.Set {
		if modifiable(string(h.Name)) && sendable(h.Value) {
			add = append(add, option(h, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD))
		}
	}
	for _, h := range f.Add {
		if modifiable(string(h.Name)) && sendable(h.Value) {
			add = append(add, option(h, corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD))
		}
	}
	for _, h := range f.Remove {
		if modifiable(h) {
			remove = append(remove, strings.ToLower(h))
		}
	}
	return add, remove
}

// modifiable reports whether Envoy lets a route change the header name:
// not Host, nor a pseudo-header. Envoy refuses a route configuration that
// would, and with it the Gateway's whole Config: such a change is left
// out, and reported (unmodifiableHeader).
func modifiable(name string) bool {
	return !strings.EqualFold(name, "host") && !strings.HasPrefix(name, ":")
}

// sendable reports whether Envoy sends a header value or path as it is:
// it refuses one with a line break or a NUL.
func sendable(v string) bool { return !strings.ContainsAny(v, "\r\n\x00") }

// badPaths is the problem of the first path a rule's filters would
// redirect or rewrite to that Envoy refuses; such a filter answers 500.
func badPaths(fs []gwv1.HTTPRouteFilter) *problem {
	for _, f := range fs {
		var p *gwv1.HTTPPathModifier
		switch {
		case f.RequestRedirect != nil:
			p = f.RequestRedirect.Path
		case f.URLRewrite != nil:
			p = f.URLRewrite.Path
		}
		if p == nil {
			continue
		}
		for _, v := range []*string{p.ReplaceFullPath, p.ReplacePrefixMatch} {
			if v != nil && !sendable(*v) {
				return problemf(string(gwv1.RouteReasonUnsupportedValue), "path %q holds a control character: its rule answers 500", *v)
			}
		}
	}
	return nil
}

// unmodifiableHeader is the problem of the first header that a rule's
// header filters, or its backends', would change and Envoy does not let
// them.
func unmodifiableHeader(rule []gwv1.HTTPRouteFilter, backends [][]gwv1.HTTPRouteFilter) *problem {
	for _, fs := range append([][]gwv1.HTTPRouteFilter{rule}, backends...) {
		for _, f := range fs {
			for _, hf := range []*gwv1.HTTPHeaderFilter{f.RequestHeaderModifier, f.ResponseHeaderModifier} {
				if hf == nil {
					continue
				}
				names := hf.Remove
				for _, h := range append(hf.Set, hf.Add...) {
					names = append(names, string(h.Name))
					if !sendable(h.Value) {
						return problemf(string(gwv1.RouteReasonUnsupportedValue), "the value of header %q holds a control character; the change is left out", h.Name)
					}
				}
				for _, n := range names {
					if !modifiable(n) {
						return problemf(string(gwv1.RouteReasonUnsupportedValue), "header %q cannot be modified by a filter; the change is left out", n)
					}
				}
			}
		}
	}
	return nil
}

// matchedPrefix is the path prefix m matches, without its trailing
// slashes; "" when m matches no prefix but "/".
func matchedPrefix(m gwv1.HTTPRouteMatch) string {
	if m.Path != nil && m.Path.Value != nil && (m.Path.Type == nil || *m.Path.Type == gwv1.PathMatchPathPrefix) {
		return trimPrefix(*m.Path.Value)
	}
	return ""
}

// prefixRewrite replaces the prefix that m matched with replacement,
// element by element: "/a" → "/b" makes "/a/c" "/b/c" and "/a" "/b";
// "/a" → "/" makes "/a/c" "/c" and "/a" "/".
func prefixRewrite(m gwv1.HTTPRouteMatch, replacement string) *matcherv3.RegexMatchAndSubstitute {
	matched, repl := regexp.QuoteMeta(matchedPrefix(m)), trimPrefix(replacement)
	if repl == "" {
		return &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^" + matched + "/*"}, Substitution: "/"}
	}
	return &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^" + matched}, Substitution: literal(repl)}
}

// fullPathRewrite replaces the whole path.
func fullPathRewrite(path string) *matcherv3.RegexMatchAndSubstitute {
	return &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^/.*$"}, Substitution: literal(path)}
}

// literal is s as a substitution that RE2 writes as it is: a backslash
// there starts a reference to a group.
func literal(s string) string { return strings.ReplaceAll(s, `\`, `\\`) }

// rewriteAction sets a URLRewrite filter's host and path.
func rewriteAction(ra *routev3.RouteAction, f *gwv1.HTTPURLRewriteFilter, m gwv1.HTTPRouteMatch) {
	if f == nil {
		return
	}
	if f.Hostname != nil {
		ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: string(*f.Hostname)}
	}
	if p := f.Path; p != nil {
		switch {
		case p.Type == gwv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
			ra.RegexRewrite = fullPathRewrite(*p.ReplaceFullPath)
		case p.Type == gwv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
			ra.RegexRewrite = prefixRewrite(m, *p.ReplacePrefixMatch)
		}
	}
}

// redirectCodes are Envoy's redirect response codes by status.
var redirectCodes = map[int]routev3.RedirectAction_RedirectResponseCode{
	301: routev3.RedirectAction_MOVED_PERMANENTLY,
	302: routev3.RedirectAction_FOUND,
	303: routev3.RedirectAction_SEE_OTHER,
	307: routev3.RedirectAction_TEMPORARY_REDIRECT,
	308: routev3.RedirectAction_PERMANENT_REDIRECT,
}

// redirectAction is a RequestRedirect filter as Envoy redirects; 302 when
// it gives no status.
func redirectAction(f *gwv1.HTTPRequestRedirectFilter, m gwv1.HTTPRouteMatch) *routev3.RedirectAction {
	ra := &routev3.RedirectAction{ResponseCode: routev3.RedirectAction_FOUND}
	if f.StatusCode != nil {
		if code, ok := redirectCodes[*f.StatusCode]; ok {
			ra.ResponseCode = code
		}
	}
	if f.Scheme != nil {
		ra.SchemeRewriteSpecifier = &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: *f.Scheme}
	}
	if f.Hostname != nil {
		ra.HostRedirect = string(*f.Hostname)
	}
	if f.Port != nil {
		ra.PortRedirect = uint32(*f.Port)
	}
	if p := f.Path; p != nil {
		switch {
		case p.Type == gwv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
			ra.PathRewriteSpecifier = &routev3.RedirectAction_PathRedirect{PathRedirect: *p.ReplaceFullPath}
		case p.Type == gwv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
			ra.PathRewriteSpecifier = &routev3.RedirectAction_RegexRewrite{RegexRewrite: prefixRewrite(m, *p.ReplacePrefixMatch)}
		}
	}
	return ra
}

// timeouts sets a rule's timeouts: the request's, or else the backend
// request's, as the route's timeout (0s: none).
func timeouts(ra *routev3.RouteAction, to *gwv1.HTTPRouteTimeouts) {
	if to == nil {
		return
	}
	for _, d := range []*gwv1.Duration{to.Request, to.BackendRequest} {
		if d == nil {
			continue
		}
		if dur, err := time.ParseDuration(string(*d)); err == nil {
			ra.Timeout = durationpb.New(dur)
			return
		}
	}
}

// mirrors resolves a rule's RequestMirror filters: the problem is the
// first mirror backend that does not resolve, which is left out.
func (t *translation) mirrors(r routeObject, filters []gwv1.HTTPRouteFilter) ([]*routev3.RouteAction_RequestMirrorPolicy, *problem) {
	var out []*routev3.RouteAction_RequestMirrorPolicy
	var first *problem
	for _, f := range filters {
		if f.Type != gwv1.HTTPRouteFilterRequestMirror || f.RequestMirror == nil {
			continue
		}
		name, p := t.resolve(r, f.RequestMirror.BackendRef, false)
		if p != nil {
			if first == nil {
				first = p
			}
			continue
		}
		mp := &routev3.RouteAction_RequestMirrorPolicy{Cluster: name}
		if fr := mirrorFraction(f.RequestMirror); fr != nil {
			mp.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: fr}
		}
		out = append(out, mp)
	}
	return out, first
}

// mirrorFraction is the share of requests a mirror copies: nil for all.
func mirrorFraction(f *gwv1.HTTPRequestMirrorFilter) *typev3.FractionalPercent {
	switch {
	case f.Percent != nil:
		return &typev3.FractionalPercent{Numerator: uint32(max(*f.Percent, 0)), Denominator: typev3.FractionalPercent_HUNDRED}
	case f.Fraction != nil && f.Fraction.Denominator != nil && *f.Fraction.Denominator > 0:
		n := int64(max(f.Fraction.Numerator, 0)) * 1_000_000 / int64(*f.Fraction.Denominator)
		return &typev3.FractionalPercent{Numerator: uint32(min(n, 1_000_000)), Denominator: typev3.FractionalPercent_MILLION}
	}
	return nil
}
