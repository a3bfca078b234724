package gateway

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Attribution is a route whose rules a proxy's rejection names.
type Attribution struct {
	Route RouteKey
	// Generation is the route's generation whose rules were rejected.
	Generation int64
	// Entries are the names of its Envoy routes the rejection names.
	Entries []string
}

// Attribute returns the routes of a Gateway's Config c whose rules a
// proxy's rejection of it (its error_detail, message) names; none when it
// names no route's, and the rejection is the whole Config's. A rejection
// names a route's rules in one of two ways:
//
//   - by where they are: a failed constraint of Envoy's proto validation
//     ends with the path of the field it failed, as
//     "RouteConfigurationValidationError.VirtualHosts[1]: ... caused by
//     VirtualHostValidationError.Routes[2]: ...", after a dump of the route
//     configuration that starts with its name; the Envoy route at that
//     place is the one rejected;
//   - by what they hold, quoted: an Envoy route's name, or one of its
//     regular expressions ("regex 'x{2,200}' RE2 program size of 402 >
//     max program size ..."). A message that dumps a route configuration
//     (and so quotes every route's name) is read only the first way.
//
// Attribute is pure: it reads message and c only.
func Attribute(c translate.Config, message string) []Attribution {
	rcs := allRouteConfigurations(c)
	found := map[RouteKey]*Attribution{}
	add := func(r *routev3.Route) {
		k, gen, ok := routeKeyOf(r)
		if !ok {
			return
		}
		a := found[k]
		if a == nil {
			a = &Attribution{Route: k}
			found[k] = a
		}
		a.Generation = max(a.Generation, gen)
		if !strings.Contains(strings.Join(a.Entries, "\n"), r.GetName()) {
			a.Entries = append(a.Entries, r.GetName())
		}
	}
	if vh, route, ok := validationPath(message); ok {
		if rc := dumped(rcs, message); rc != nil && vh < len(rc.GetVirtualHosts()) && route < len(rc.GetVirtualHosts()[vh].GetRoutes()) {
			add(rc.GetVirtualHosts()[vh].GetRoutes()[route])
		}
	} else if !dumpsRoutes(message) {
		for _, rc := range rcs {
			for _, vh := range rc.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					if quotesAny(message, quotable(r)) {
						add(r)
					}
				}
			}
		}
	}
	out := make([]Attribution, 0, len(found))
	for _, a := range found {
		sort.Strings(a.Entries)
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Route.String() < out[j].Route.String() })
	return out
}

// allRouteConfigurations reads every route configuration of c, in order;
// those that do not parse are left out.
func allRouteConfigurations(c translate.Config) []*routev3.RouteConfiguration {
	var out []*routev3.RouteConfiguration
	for _, raw := range c.Spec.Resources.Routes {
		rc := &routev3.RouteConfiguration{}
		if (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw.Raw, rc) == nil {
			out = append(out, rc)
		}
	}
	return out
}

// validationPathRE finds where in a route configuration Envoy's proto
// validation failed: the virtual host's index, then the route's.
var validationPathRE = regexp.MustCompile(`RouteConfigurationValidationError\.VirtualHosts\[(\d+)\].*?VirtualHostValidationError\.Routes\[(\d+)\]`)

func validationPath(message string) (vh, route int, ok bool) {
	m := validationPathRE.FindStringSubmatch(message)
	if m == nil {
		return 0, 0, false
	}
	vh, err1 := strconv.Atoi(m[1])
	route, err2 := strconv.Atoi(m[2])
	return vh, route, err1 == nil && err2 == nil
}

// dumped is the route configuration of rcs whose dump message starts
// with: the one whose name it gives first, or the only one.
func dumped(rcs []*routev3.RouteConfiguration, message string) *routev3.RouteConfiguration {
	if i := strings.Index(message, "name: \""); i >= 0 {
		rest := message[i+len("name: \""):]
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			for _, rc := range rcs {
				if rc.GetName() == rest[:j] {
					return rc
				}
			}
			return nil
		}
	}
	if len(rcs) == 1 {
		return rcs[0]
	}
	return nil
}

// dumpsRoutes reports whether message holds a dump of route
// configurations, as Envoy's proto validation gives it, whole or cut.
func dumpsRoutes(message string) bool {
	return strings.Contains(message, "virtual_hosts {") || strings.Contains(message, "ValidationError.")
}

// quotable are what of an Envoy route a message may quote: its name and
// its regular expressions.
func quotable(r *routev3.Route) []string {
	out := []string{r.GetName()}
	m := r.GetMatch()
	out = append(out, m.GetSafeRegex().GetRegex())
	for _, h := range m.GetHeaders() {
		out = append(out, h.GetStringMatch().GetSafeRegex().GetRegex())
	}
	for _, q := range m.GetQueryParameters() {
		out = append(out, q.GetStringMatch().GetSafeRegex().GetRegex())
	}
	out = append(out, r.GetRoute().GetRegexRewrite().GetPattern().GetRegex(), r.GetRedirect().GetRegexRewrite().GetPattern().GetRegex())
	return out
}

// quotesAny reports whether message quotes one of ss, in single or
// double quotes.
func quotesAny(message string, ss []string) bool {
	for _, s := range ss {
		if s != "" && (strings.Contains(message, "'"+s+"'") || strings.Contains(message, `"`+s+`"`)) {
			return true
		}
	}
	return false
}
