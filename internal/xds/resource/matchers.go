package resource

import (
	"maps"
	"math"
	"slices"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The generic matcher API (xds.type.matcher.v3.Matcher): a tree of
// predicates on inputs, leading to actions. Envoy builds its inputs, custom
// matchers and actions as extensions of the kind the matcher's place takes,
// and refuses, when it loads the resource, one of another kind ("Didn't
// find a registered implementation for 'a' with type URL: 'x'") or an input
// that the place cannot match on ("Route table can only match on request
// headers, saw x"). Each place is a matchPlace. A regular expression of a
// matcher must compile in RE2, with no limit on its program's size.

// matchPlace is what the matchers of one place take.
type matchPlace struct {
	// what names the place in messages, e.g. "a virtual host's matcher".
	what string
	// inputs and actions are the types of the inputs it matches on and of
	// the actions it takes, among those this operator decodes.
	inputs, actions map[protoreflect.FullName]bool
	// inputsAre says what its inputs are, for messages.
	inputsAre string
}

var (
	// routeMatch is a virtual host's matcher: on request headers, to a
	// route or a list of routes.
	routeMatch = matchPlace{
		what:      "a virtual host's matcher",
		inputs:    set("envoy.type.matcher.v3.HttpRequestHeaderMatchInput"),
		actions:   set("envoy.config.route.v3.Route", "envoy.config.route.v3.RouteList"),
		inputsAre: "request headers (HttpRequestHeaderMatchInput)",
	}
	// rbacMatch is the RBAC HTTP filter's matcher: on the request, to an
	// RBAC action.
	rbacMatch = matchPlace{
		what: "the RBAC filter's matcher",
		inputs: set("envoy.type.matcher.v3.HttpRequestHeaderMatchInput", "envoy.type.matcher.v3.HttpRequestQueryParamMatchInput",
			"envoy.type.matcher.v3.HttpRequestTrailerMatchInput"),
		actions:   set("envoy.config.rbac.v3.Action"),
		inputsAre: "the request's headers, query parameters or trailers",
	}
	// filterChainMatch is a listener's filter_chain_matcher: on the
	// connection, to the name of a filter chain. This operator decodes none
	// of Envoy's network inputs.
	filterChainMatch = matchPlace{
		what:      "a listener's filter_chain_matcher",
		actions:   set("google.protobuf.StringValue"),
		inputsAre: "network inputs (envoy.extensions.matching.common_inputs.network.v3), none of which this operator serves",
	}
	// treeMatchers are the custom matchers of a matcher tree
	// (envoy.matching.{http,network}.custom_matchers), predicateMatchers
	// those of a single predicate (envoy.matching.input_matchers).
	treeMatchers      = set("xds.type.matcher.v3.IPMatcher", "xds.type.matcher.v3.ServerNameMatcher")
	predicateMatchers = set("xds.type.matcher.v3.CelMatcher")
)

func set(names ...protoreflect.FullName) map[protoreflect.FullName]bool {
	s := map[protoreflect.FullName]bool{}
	for _, n := range names {
		s[n] = true
	}
	return s
}

// checkMatcher checks the inputs, custom matchers and actions of m, at
// path, against its place.
func checkMatcher(f *findings, path string, m *xdsmatcherv3.Matcher, place matchPlace) {
	if m == nil {
		return
	}
	for i, fm := range m.GetMatcherList().GetMatchers() {
		fp := index(child(path, "matcher_list"), "matchers", i)
		checkPredicate(f, child(fp, "predicate"), fm.GetPredicate(), place)
		checkOnMatch(f, child(fp, "on_match"), fm.GetOnMatch(), place)
	}
	if t := m.GetMatcherTree(); t != nil {
		tp := child(path, "matcher_tree")
		checkInput(f, child(tp, "input"), t.GetInput(), place)
		if cm := t.GetCustomMatch(); cm != nil {
			checkTyped(f, child(tp, "custom_match"), cm, treeMatchers, "a matcher tree's custom matcher (IPMatcher or ServerNameMatcher)")
		}
		for _, mp := range []struct {
			field string
			m     *xdsmatcherv3.Matcher_MatcherTree_MatchMap
		}{{"exact_match_map", t.GetExactMatchMap()}, {"prefix_match_map", t.GetPrefixMatchMap()}} {
			for _, k := range slices.Sorted(maps.Keys(mp.m.GetMap())) {
				checkOnMatch(f, child(tp, mp.field+".map["+k+"]"), mp.m.GetMap()[k], place)
			}
		}
	}
	checkOnMatch(f, child(path, "on_no_match"), m.GetOnNoMatch(), place)
}

func checkOnMatch(f *findings, path string, om *xdsmatcherv3.Matcher_OnMatch, place matchPlace) {
	if a := om.GetAction(); a != nil {
		checkTyped(f, child(path, "action"), a, place.actions, "an action of "+place.what)
	}
	checkMatcher(f, child(path, "matcher"), om.GetMatcher(), place)
}

func checkPredicate(f *findings, path string, p *xdsmatcherv3.Matcher_MatcherList_Predicate, place matchPlace) {
	if sp := p.GetSinglePredicate(); sp != nil {
		spp := child(path, "single_predicate")
		checkInput(f, child(spp, "input"), sp.GetInput(), place)
		if cm := sp.GetCustomMatch(); cm != nil {
			checkTyped(f, child(spp, "custom_match"), cm, predicateMatchers, "a predicate's custom matcher (CelMatcher)")
		}
	}
	for _, l := range []struct {
		field string
		list  *xdsmatcherv3.Matcher_MatcherList_Predicate_PredicateList
	}{{"or_matcher", p.GetOrMatcher()}, {"and_matcher", p.GetAndMatcher()}} {
		for i, q := range l.list.GetPredicate() {
			checkPredicate(f, index(path, l.field+".predicate", i), q, place)
		}
	}
	if n := p.GetNotMatcher(); n != nil {
		checkPredicate(f, child(path, "not_matcher"), n, place)
	}
}

func checkInput(f *findings, path string, in *xdscorev3.TypedExtensionConfig, place matchPlace) {
	if in == nil || in.GetTypedConfig() == nil {
		return // the protos' rules require one
	}
	if typ := in.GetTypedConfig().MessageName(); !place.inputs[typ] {
		f.add(child(path, "typed_config"), "%s matches only on %s, not on %s", place.what, place.inputsAre, typ)
	}
}

// checkTyped: the typed_config of e, at path, is one of types (what names
// them).
func checkTyped(f *findings, path string, e *xdscorev3.TypedExtensionConfig, types map[protoreflect.FullName]bool, what string) {
	if e.GetTypedConfig() == nil {
		return
	}
	if typ := e.GetTypedConfig().MessageName(); !types[typ] {
		f.add(child(path, "typed_config"), "%s is not %s", typ, what)
	}
}

// checkMatcherRegexes: the regular expressions of the generic matcher API
// compile in RE2. Envoy sets no limit on their program's size.
func checkMatcherRegexes(f *findings, m proto.Message) {
	Walk(m, "", func(m proto.Message, path string) bool {
		r, ok := m.(*xdsmatcherv3.RegexMatcher)
		if !ok {
			return true
		}
		if err := checkRegex(r.GetRegex(), math.MaxUint32, "no limit"); err != nil {
			f.add(child(path, "regex"), "%v", err)
		}
		return false
	})
}
