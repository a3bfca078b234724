package xds

import (
	"fmt"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// Config is one EnvoyConfig's contribution to its fleet.
type Config struct {
	// Name is the EnvoyConfig's namespace/name.
	Name string
	// Created orders configs: on a name clash the older one's resource wins.
	Created   time.Time
	Resources []Resource
}

// Fleet is the merged configuration of one fleet.
type Fleet struct {
	// Resources by xDS type URL.
	Resources map[string][]types.Resource
	// Version is a hash of Resources.
	Version string
	// Clashes holds, by config name, the resources it shares a name with
	// another config: both are told, and the older config's resource is served.
	Clashes map[string][]string
	// Rejected holds, by config name, why the config was left out: resources
	// that reference what does not exist.
	Rejected map[string][]error
}

// Build merges configs into one fleet's configuration. A config whose
// resources reference listeners' routes or routes' clusters that exist
// nowhere in the fleet is rejected: it is replaced by its entry in lastGood
// (the last version of it that was accepted), or left out if it has none, so
// that a proxy never loses configuration it had.
func Build(configs []Config, lastGood map[string]Config) Fleet {
	rejected := map[string][]error{}
	current := append([]Config(nil), configs...)
	for range len(configs) + 1 {
		merged, clashes := merge(current)
		problems := checkReferences(merged)
		if len(problems) == 0 {
			fleet := Fleet{Resources: byType(merged), Clashes: clashes, Rejected: rejected}
			fleet.Version = Version(fleet.Resources)
			return fleet
		}
		var next []Config
		for _, c := range current {
			if errs := problems[c.Name]; len(errs) > 0 {
				if _, already := rejected[c.Name]; !already {
					rejected[c.Name] = errs
				}
				if good, ok := lastGood[c.Name]; ok && !sameConfig(good, c) {
					next = append(next, good)
				}
				continue
			}
			next = append(next, c)
		}
		current = next
	}
	// Unreachable: every round removes at least one config.
	return Fleet{Resources: map[string][]types.Resource{}, Rejected: rejected, Version: Version(nil)}
}

func sameConfig(a, b Config) bool {
	if len(a.Resources) != len(b.Resources) {
		return false
	}
	for i := range a.Resources {
		if a.Resources[i].Message != b.Resources[i].Message {
			return false
		}
	}
	return true
}

type resourceKey struct{ typeURL, name string }

// merge keeps, for every type and name, the resource of the oldest config.
func merge(configs []Config) (map[resourceKey]Resource, map[string][]string) {
	sorted := append([]Config(nil), configs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if !sorted[i].Created.Equal(sorted[j].Created) {
			return sorted[i].Created.Before(sorted[j].Created)
		}
		return sorted[i].Name < sorted[j].Name
	})
	winners := map[resourceKey]Resource{}
	clashes := map[string][]string{}
	for _, c := range sorted {
		for _, r := range c.Resources {
			key := resourceKey{r.Kind.TypeURL, r.Name}
			if w, taken := winners[key]; taken {
				if w.Source != r.Source {
					what := fmt.Sprintf("%s %q", singular(r.Kind), r.Name)
					clashes[r.Source] = append(clashes[r.Source],
						fmt.Sprintf("%s (%s) is also defined by EnvoyConfig %s, which is older and wins", what, r.Path, w.Source))
					clashes[w.Source] = append(clashes[w.Source],
						fmt.Sprintf("%s (%s) is also defined by EnvoyConfig %s; this one is older and is served", what, w.Path, r.Source))
				}
				continue
			}
			winners[key] = r
		}
	}
	return winners, clashes
}

func byType(merged map[resourceKey]Resource) map[string][]types.Resource {
	out := map[string][]types.Resource{}
	keys := make([]resourceKey, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].typeURL != keys[j].typeURL {
			return keys[i].typeURL < keys[j].typeURL
		}
		return keys[i].name < keys[j].name
	})
	for _, k := range keys {
		out[k.typeURL] = append(out[k.typeURL], merged[k].Message)
	}
	return out
}

// checkReferences returns, by config name, the references that lead nowhere:
// a listener's route configuration (RDS) that no config defines, and a
// cluster named by a route or a TCP proxy that no config defines.
func checkReferences(merged map[resourceKey]Resource) map[string][]error {
	has := func(typeURL, name string) bool { _, ok := merged[resourceKey{typeURL, name}]; return ok }
	problems := map[string][]error{}
	report := func(r Resource, format string, args ...any) {
		problems[r.Source] = append(problems[r.Source], fmt.Errorf("%s (%q): %s", r.Path, r.Name, fmt.Sprintf(format, args...)))
	}
	checkClusters := func(r Resource, clusters []string) {
		for _, c := range clusters {
			if !has(resourcev3.ClusterType, c) {
				report(r, "cluster %q does not exist", c)
			}
		}
	}
	for _, r := range sortedResources(merged) {
		switch m := r.Message.(type) {
		case *listenerv3.Listener:
			for _, hcm := range connectionManagers(m) {
				if rds := hcm.GetRds(); rds != nil && !has(resourcev3.RouteType, rds.GetRouteConfigName()) {
					report(r, "route configuration %q does not exist", rds.GetRouteConfigName())
				}
				checkClusters(r, routeClusters(hcm.GetRouteConfig()))
			}
			checkClusters(r, tcpProxyClusters(m))
		case *routev3.RouteConfiguration:
			checkClusters(r, routeClusters(m))
		case *clusterv3.Cluster:
			// EDS clusters may wait for their endpoints; nothing to check.
		}
	}
	return problems
}

func sortedResources(merged map[resourceKey]Resource) []Resource {
	out := make([]Resource, 0, len(merged))
	for _, r := range merged {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path+out[i].Source < out[j].Path+out[j].Source })
	return out
}

// connectionManagers returns the HTTP connection managers of a listener:
// those of its filter chains, and its API listener's (proxyless gRPC).
func connectionManagers(l *listenerv3.Listener) []*hcmv3.HttpConnectionManager {
	var out []*hcmv3.HttpConnectionManager
	add := func(a *anypb.Any) {
		hcm := &hcmv3.HttpConnectionManager{}
		if a != nil && a.MessageIs(hcm) && a.UnmarshalTo(hcm) == nil {
			out = append(out, hcm)
		}
	}
	for _, fc := range filterChains(l) {
		for _, f := range fc.GetFilters() {
			add(f.GetTypedConfig())
		}
	}
	add(l.GetApiListener().GetApiListener())
	return out
}

func filterChains(l *listenerv3.Listener) []*listenerv3.FilterChain {
	chains := append([]*listenerv3.FilterChain(nil), l.GetFilterChains()...)
	if l.GetDefaultFilterChain() != nil {
		chains = append(chains, l.GetDefaultFilterChain())
	}
	return chains
}

func tcpProxyClusters(l *listenerv3.Listener) []string {
	var out []string
	for _, fc := range filterChains(l) {
		for _, f := range fc.GetFilters() {
			tp := &tcpproxyv3.TcpProxy{}
			if a := f.GetTypedConfig(); a != nil && a.MessageIs(tp) && a.UnmarshalTo(tp) == nil {
				if c := tp.GetCluster(); c != "" {
					out = append(out, c)
				}
				for _, w := range tp.GetWeightedClusters().GetClusters() {
					out = append(out, w.GetName())
				}
			}
		}
	}
	return out
}

// routeClusters returns the clusters a route configuration sends traffic to.
func routeClusters(rc *routev3.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			a := r.GetRoute()
			if c := a.GetCluster(); c != "" {
				out = append(out, c)
			}
			for _, w := range a.GetWeightedClusters().GetClusters() {
				out = append(out, w.GetName())
			}
			for _, m := range a.GetRequestMirrorPolicies() {
				if m.GetCluster() != "" {
					out = append(out, m.GetCluster())
				}
			}
		}
	}
	return out
}

// Check returns what is wrong with one EnvoyConfig's resources, given the
// other EnvoyConfigs of its fleet: resources that do not decode or validate,
// and references that lead nowhere in the fleet with it. Admission uses it.
func Check(name string, res examplev1.EnvoyResources, others []Config) []error {
	resources, errs := Parse(name, res)
	if len(errs) > 0 {
		return errs
	}
	configs := []Config{{Name: name, Resources: resources}}
	for _, o := range others {
		if o.Name != name {
			configs = append(configs, o)
		}
	}
	return Build(configs, nil).Rejected[name]
}
