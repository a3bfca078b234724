package gateway

import (
	"encoding/json"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// A route refused alone (Input.Refused) keeps the rules the fleet's
// published revision serves of it (Input.Published), as an EnvoyConfig
// whose change is refused keeps its published content: a bad edit to a
// route that serves takes none of its traffic away. Its earlier rules are
// read back from the published Config, where each Envoy route names the
// route it comes from in its MetadataKey metadata (kind, namespace, name,
// generation), with the clusters they send to; they are served in the
// virtual hosts they were served in, on the ports still served, ordered
// among the other routes' rules by what their Envoy match says of their
// precedence.

// KeptSuffix starts what a refused route's Accepted condition says when
// it keeps its earlier rules, after why it is refused: " <generation>
// until this is fixed" follows.
const KeptSuffix = "; the fleet keeps serving the route's rules of generation"

// earlierRoute is what a Gateway's published Config serves of one route.
type earlierRoute struct {
	// generation is the route's generation those rules were translated
	// from.
	generation int64
	// placed holds, by Gateway listener port, its Envoy routes as they
	// were placed: in the virtual host of which hostname, and served in
	// which virtual host (whose listener it came through).
	placed map[gwv1.PortNumber][]earlierEntry
}

// earlierEntry is one Envoy route of a route in a published Config: the
// hostname whose routes it was placed among (hostGroup), and the virtual
// host it was served in.
type earlierEntry struct {
	group, vhost string
	route        *routev3.Route
}

// hostGroupsMetadata is the metadata of a virtual host whose routes come
// from the hostnames of groups, in order.
func hostGroupsMetadata(groups []hostGroup) *corev3.Metadata {
	if len(groups) == 0 {
		return nil
	}
	list := make([]any, 0, len(groups))
	for _, g := range groups {
		list = append(list, map[string]any{"host": g.host, "routes": float64(g.routes)})
	}
	md, err := structpb.NewStruct(map[string]any{"hosts": list})
	if err != nil {
		return nil
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{MetadataKey: md}}
}

// groupOf returns, for each Envoy route of vh, the hostname whose routes
// it was placed among, as the virtual host's metadata says
// (hostGroupsMetadata); the virtual host's own where it says nothing.
func groupOf(vh *routev3.VirtualHost) []string {
	out := make([]string, 0, len(vh.GetRoutes()))
	for _, v := range vh.GetMetadata().GetFilterMetadata()[MetadataKey].GetFields()["hosts"].GetListValue().GetValues() {
		g := v.GetStructValue().GetFields()
		for range int(g["routes"].GetNumberValue()) {
			out = append(out, g["host"].GetStringValue())
		}
	}
	for len(out) < len(vh.GetRoutes()) {
		out = append(out, vh.GetName())
	}
	return out
}

// earlierCluster is a cluster of the published Config, and its
// serviceEndpoints when it is a Service's.
type earlierCluster struct {
	raw       runtime.RawExtension
	endpoints *examplev1.ServiceEndpoints
}

// routeKeyOf reads which route an Envoy route comes from, and the
// generation of its rules, from its metadata.
func routeKeyOf(r *routev3.Route) (RouteKey, int64, bool) {
	md := r.GetMetadata().GetFilterMetadata()[MetadataKey].GetFields()
	kind, ns, name := md["kind"].GetStringValue(), md["namespace"].GetStringValue(), md["name"].GetStringValue()
	if kind == "" || name == "" {
		return RouteKey{}, 0, false
	}
	return RouteKey{Kind: gwv1.Kind(kind), NamespacedName: types.NamespacedName{Namespace: ns, Name: name}},
		int64(md["generation"].GetNumberValue()), true
}

// routeConfigurations reads the route configurations of a Config, by the
// Gateway listener port whose they are; those that do not parse, or are
// not named as a port's of gw, are left out.
func routeConfigurations(c *translate.Config, gw types.NamespacedName) map[gwv1.PortNumber]*routev3.RouteConfiguration {
	out := map[gwv1.PortNumber]*routev3.RouteConfiguration{}
	if c == nil {
		return out
	}
	for _, raw := range c.Spec.Resources.Routes {
		rc := &routev3.RouteConfiguration{}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw.Raw, rc); err != nil {
			continue
		}
		port, ok := strings.CutPrefix(rc.GetName(), prefix(gw)+"/")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			continue
		}
		out[gwv1.PortNumber(n)] = rc
	}
	return out
}

// earlierRoutes reads, from the published Config of gw, the Envoy routes
// it serves of each of the routes in want.
func earlierRoutes(pub *translate.Config, gw types.NamespacedName, want map[RouteKey]bool) map[RouteKey]*earlierRoute {
	out := map[RouteKey]*earlierRoute{}
	if len(want) == 0 {
		return out
	}
	for port, rc := range routeConfigurations(pub, gw) {
		for _, vh := range rc.GetVirtualHosts() {
			groups := groupOf(vh)
			for i, r := range vh.GetRoutes() {
				k, gen, ok := routeKeyOf(r)
				if !ok || !want[k] {
					continue
				}
				er := out[k]
				if er == nil {
					er = &earlierRoute{placed: map[gwv1.PortNumber][]earlierEntry{}}
					out[k] = er
				}
				er.generation = max(er.generation, gen)
				er.placed[port] = append(er.placed[port], earlierEntry{group: groups[i], vhost: vh.GetName(), route: r})
			}
		}
	}
	return out
}

// earlierClusters reads the clusters of the published Config, by name,
// with their serviceEndpoints.
func earlierClusters(pub *translate.Config) map[string]earlierCluster {
	out := map[string]earlierCluster{}
	if pub == nil {
		return out
	}
	for _, raw := range pub.Spec.Resources.Clusters {
		var c struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw.Raw, &c) != nil || c.Name == "" {
			continue
		}
		out[c.Name] = earlierCluster{raw: raw}
	}
	for i := range pub.Spec.ServiceEndpoints {
		se := pub.Spec.ServiceEndpoints[i]
		if c, ok := out[se.Cluster]; ok {
			c.endpoints = &se
			out[se.Cluster] = c
		}
	}
	return out
}

// clustersOf are the clusters an Envoy route sends requests to, mirrors
// included.
func clustersOf(r *routev3.Route) []string {
	ra := r.GetRoute()
	if ra == nil {
		return nil
	}
	var out []string
	if c := ra.GetCluster(); c != "" {
		out = append(out, c)
	}
	for _, w := range ra.GetWeightedClusters().GetClusters() {
		out = append(out, w.GetName())
	}
	for _, m := range ra.GetRequestMirrorPolicies() {
		out = append(out, m.GetCluster())
	}
	return out
}

// matchPathLen is the length of the path an Envoy match matches.
func matchPathLen(m *routev3.RouteMatch) int {
	switch {
	case m.GetPath() != "":
		return len(m.GetPath())
	case m.GetSafeRegex() != nil:
		return len(m.GetSafeRegex().GetRegex())
	case m.GetPathSeparatedPrefix() != "":
		return len(m.GetPathSeparatedPrefix())
	}
	return len(m.GetPrefix())
}

// orderOf is the precedence of an earlier Envoy route among a virtual
// host's, as its match tells it: the kind and length of its path match,
// its method, its headers and query parameters; then the route's age and
// name, and the rule and match its metadata names.
func orderOf(r *routev3.Route, created metav1.Time, route string) precedence {
	m := r.GetMatch()
	md := r.GetMetadata().GetFilterMetadata()[MetadataKey].GetFields()
	var order precedence
	switch {
	case m.GetPath() != "":
		order.pathRank = rankExact
	case m.GetSafeRegex() != nil:
		order.pathRank = rankRegex
	default:
		order.pathRank = rankPrefix
	}
	order.pathLen = matchPathLen(m)
	if n, ok := md["pathLength"]; ok {
		order.pathLen = int(n.GetNumberValue())
	}
	for _, h := range m.GetHeaders() {
		if h.GetName() == ":method" {
			order.method = true
		} else {
			order.headers++
		}
	}
	order.queries = len(m.GetQueryParameters())
	order.created, order.route = created, route
	order.rule, order.match = int(md["rule"].GetNumberValue()), int(md["match"].GetNumberValue())
	return order
}

// keepEarlier places the earlier rules of the route r, refused alone, in
// the virtual hosts they were served in, on the ports of valid listeners,
// and returns their generation; false when it has none to keep: no rules
// in the published Config, or a Service of another namespace that they
// send to and that no ReferenceGrant lets the route name now.
func (t *translation) keepEarlier(r routeObject, ls []*listener) (int64, bool) {
	er := t.earlier[RouteKey{Kind: r.kind, NamespacedName: r.name()}]
	if er == nil {
		return 0, false
	}
	type placement struct {
		port gwv1.PortNumber
		host string
		l    *listener
		e    entry
	}
	type key struct {
		port       gwv1.PortNumber
		host, name string
		l          *listener
	}
	var out []placement
	seen := map[key]bool{}
	for port, es := range er.placed {
		if _, ok := t.ports[port]; !ok {
			continue
		}
		for _, ee := range es {
			// Served in ee.vhost: it came through that virtual host's
			// listener, and is placed among its hostname's routes again.
			l := owner(ls, port, ee.vhost)
			if l == nil {
				continue
			}
			e := entry{order: orderOf(ee.route, r.meta.CreationTimestamp, r.meta.Namespace+"/"+r.meta.Name), route: ee.route, clusters: clustersOf(ee.route)}
			for _, c := range e.clusters {
				if !t.earlierReachable(r, c) {
					return 0, false
				}
			}
			if k := (key{port, ee.group, ee.route.GetName(), l}); !seen[k] {
				seen[k] = true
				out = append(out, placement{port: port, host: ee.group, l: l, e: e})
			}
		}
	}
	if len(out) == 0 {
		return 0, false
	}
	for _, p := range out {
		t.ports[p.port][p.host] = append(t.ports[p.port][p.host], placed{entry: p.e, listener: p.l})
	}
	return er.generation, true
}

// earlierReachable reports whether the route r may still send requests to
// the cluster name of the published Config: one this translation has, or
// the one of unresolved backends, or a Service's that r may name.
func (t *translation) earlierReachable(r routeObject, name string) bool {
	if _, ok := t.clusters[name]; ok || name == t.invalidClusterName() {
		return true
	}
	c, ok := t.earlierCluster[name]
	if !ok || c.endpoints == nil {
		return ok
	}
	svc := refKeyIn(c.endpoints.Service, t.gw.Namespace)
	return permitted(t.in.Grants, reference{gwv1.GroupName, string(r.kind), r.meta.Namespace, "", "Service", svc.Namespace, svc.Name})
}

// refKeyIn reads a Config's reference to a Service: "name" in the
// Gateway's namespace ns, or "namespace/name".
func refKeyIn(ref, ns string) types.NamespacedName {
	if before, after, ok := strings.Cut(ref, "/"); ok {
		return types.NamespacedName{Namespace: before, Name: after}
	}
	return types.NamespacedName{Namespace: ns, Name: ref}
}
