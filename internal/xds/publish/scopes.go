package publish

import (
	"maps"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Touched is what a change of a fleet's content touched that its proxies'
// traffic can show: by scope (analysis.ScopeHTTP, analysis.ScopeCluster), the
// EnvoyConfigs whose change touched it, sorted. Empty when the change
// touched nothing traffic shows (only secrets or endpoints changed, say).
type Touched map[string][]string

// Scopes returns the scopes touched, sorted; nil for none.
func (t Touched) Scopes() []string {
	if len(t) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(t))
}

// TouchedScopes returns the scopes that the change from the content
// before (a revision's Configs) to after touched:
//
//   - http:<stat_prefix> of each HTTP connection manager of after whose
//     listener is new or changed (its filter chains are the listener's), or
//     whose route configuration over RDS is new or changed;
//   - cluster:<name> of each cluster of after that is new or changed, and
//     of each cluster that a new or changed route configuration or listener
//     sends traffic to and did not before; only of the clusters that a
//     listener or route configuration of after sends traffic to.
//
// A resource's EnvoyConfig is the one that gives it; where two give one
// name, the first of the revision's order (the older), as translation
// serves it. Resources that do not decode are left out: translation did
// not serve them.
func TouchedScopes(before, after []translate.Config) Touched {
	was, is := indexResources(before), indexResources(after)
	out := Touched{}
	add := func(scope, config string) {
		if !slices.Contains(out[scope], config) {
			out[scope] = append(out[scope], config)
			slices.Sort(out[scope])
		}
	}
	changed := func(typeURL, name string) (given, ok bool) {
		now, exists := is[typeURL][name]
		if !exists {
			return false, false
		}
		then, existed := was[typeURL][name]
		return true, !existed || !proto.Equal(then.msg, now.msg)
	}
	// Clusters sent to by a changed resource that its previous content did
	// not send to.
	newlyReferenced := func(typeURL, name string, owner string) {
		sent := map[string]bool{}
		if then, ok := was[typeURL][name]; ok {
			for _, ref := range resource.References(then.msg) {
				if ref.TypeURL == resourcev3.ClusterType {
					sent[ref.Name] = true
				}
			}
		}
		for _, ref := range resource.References(is[typeURL][name].msg) {
			if ref.TypeURL == resourcev3.ClusterType && !sent[ref.Name] {
				add(analysis.ScopeCluster(ref.Name), owner)
			}
		}
	}
	// A cluster that no listener or route configuration sends to serves no
	// traffic to judge it by (a cluster added ahead of its route): judging
	// its scope would have the step wait for traffic for ever.
	used := map[string]bool{}
	for _, typeURL := range []string{resourcev3.ListenerType, resourcev3.RouteType} {
		for _, r := range is[typeURL] {
			for _, ref := range resource.References(r.msg) {
				if ref.TypeURL == resourcev3.ClusterType {
					used[ref.Name] = true
				}
			}
		}
	}
	for name, r := range is[resourcev3.ClusterType] {
		if _, ok := changed(resourcev3.ClusterType, name); ok && used[name] {
			add(analysis.ScopeCluster(name), r.config)
		}
	}
	for name, r := range is[resourcev3.RouteType] {
		if _, ok := changed(resourcev3.RouteType, name); ok {
			newlyReferenced(resourcev3.RouteType, name, r.config)
		}
	}
	for name, r := range is[resourcev3.ListenerType] {
		_, listenerChanged := changed(resourcev3.ListenerType, name)
		if listenerChanged {
			newlyReferenced(resourcev3.ListenerType, name, r.config)
		}
		for _, hcm := range connectionManagers(r.msg.(*listenerv3.Listener)) {
			scope := analysis.ScopeHTTP(hcm.GetStatPrefix())
			if listenerChanged {
				add(scope, r.config)
			}
			if rds := hcm.GetRds(); rds != nil {
				if given, ok := changed(resourcev3.RouteType, rds.GetRouteConfigName()); given && ok {
					add(scope, is[resourcev3.RouteType][rds.GetRouteConfigName()].config)
				}
			}
		}
	}
	return out
}

// given is one resource of a revision and the EnvoyConfig that gives it.
type given struct {
	msg    proto.Message
	config string
}

// indexResources returns the listeners, route configurations and clusters
// of configs, by type URL and name.
func indexResources(configs []translate.Config) map[string]map[string]given {
	out := map[string]map[string]given{
		resourcev3.ListenerType: {}, resourcev3.RouteType: {}, resourcev3.ClusterType: {},
	}
	for _, c := range configs {
		rs, _ := resource.Parse(c.Name, c.Recorded().Spec.Resources)
		for _, r := range rs {
			switch r.Message.(type) {
			case *listenerv3.Listener, *routev3.RouteConfiguration, *clusterv3.Cluster:
			default:
				continue
			}
			if _, dup := out[r.Kind.TypeURL][r.Name]; !dup {
				out[r.Kind.TypeURL][r.Name] = given{msg: r.Message, config: c.Name}
			}
		}
	}
	return out
}

// connectionManagers returns the HTTP connection managers of a listener's
// filter chains, its default one included.
func connectionManagers(l *listenerv3.Listener) []*hcmv3.HttpConnectionManager {
	chains := slices.Clone(l.GetFilterChains())
	if l.GetDefaultFilterChain() != nil {
		chains = append(chains, l.GetDefaultFilterChain())
	}
	var out []*hcmv3.HttpConnectionManager
	for _, fc := range chains {
		for _, f := range fc.GetFilters() {
			hcm := &hcmv3.HttpConnectionManager{}
			if a := f.GetTypedConfig(); a != nil && a.MessageIs(hcm) && a.UnmarshalTo(hcm) == nil {
				out = append(out, hcm)
			}
		}
	}
	return out
}
